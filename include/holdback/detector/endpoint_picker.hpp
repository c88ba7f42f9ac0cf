// EndpointPicker: which endpoint a gateway sends the next dispatched request to. One rule shared
// by the gateway example and the simulator, so the simulator predicts the gateway it documents.
//
// The rule, in order:
//   1. Candidates: the endpoints the detector's filter keeps; when it keeps none (a detector that
//      does not fail open, e.g. the concurrency detector with every endpoint full), every endpoint.
//   2. Prefer endpoints that can hold the request at all: one whose KV capacity is known
//      (Endpoint::kvCapacityTokens > 0) and below the request's `startTokens` can never start it
//      (a mixed pool's small server with a long prompt), so it is chosen only when no endpoint
//      can; and when no candidate of rule 1 can but another endpoint can (the filter left it out,
//      full for now), that endpoint is the candidate. Among those, prefer candidates whose last
//      scrape succeeded (`up[i] != 0`; an empty `up` means all up).
//   3. With fitFirst (EndpointPickerOptions): then candidates where the request starts now, by
//      the detector's room (SaturationDetector::room): a free slot and KV for the request's
//      `startTokens` (its input: what the server needs to admit it). A detector without a
//      capacity model makes every candidate fit (the rule then has no effect).
//   4a. With priorityRouting (EndpointPickerOptions) and the counts passed to pick(): then the
//      fewest requests in flight of the request's priority or above (per slot, as rule 4), so that
//      a protected request goes where it has the fewest requests to share its server with that a
//      server preempting by priority would not preempt for it; a batch backlog no longer decides
//      where the protected requests go. The host reads the counts from its dispatch ledger
//      (DispatchLedger::inFlightAtOrAbove, InFlightTracker::inFlightAtOrAbove, with
//      DispatchLedgerOptions::priorityLevels set to its bands). Without the counts (an empty or
//      short span) the rule has no effect.
//   4. Then the fewest requests in flight (Endpoint::inFlightRequests: the gateway's own count,
//      always current; the pool's while a replica feed is live, DispatchLedger::setPeerFeed);
//      per slot (inFlightRequests / Endpoint::maxRunningRequests) when every endpoint's slot
//      count is known, so that a mixed pool's large endpoints take their share (on a pool of one
//      size the same order as the counts).
//   5. Then the smallest scraped waiting queue (Endpoint::waitingQueueSize; an unknown, NaN,
//      queue after every known one).
//   6. Ties: round-robin. The picker keeps a cursor; among the tied endpoints it takes the first at
//      or after the cursor (wrapping), and moves the cursor past the endpoint it picked. Equal
//      endpoints therefore share the load instead of the first one taking every tie.
// The result is a pure function of the inputs and the picker's history (deterministic).
//
// Cost: one pass over the pool (and one over the slot counts). An endpoint with a higher load than
// the best candidate so far (and, with fitFirst, than the best fitting one) is passed over after
// one load; the detector is asked only about an endpoint that would win. With a detector whose
// filter decides each endpoint alone (SaturationDetector::filtersEachEndpointAlone, both built-in
// detectors), the filter is called for one endpoint at a time, only for such an endpoint, and for
// the whole pool in one call after 32 such calls; otherwise once over the pool before the pass.
// Rule 3 reads the detector's room the same way (one endpoint per room() call, the whole pool in
// one call after 16 such calls), so the picker relies on room() answering each endpoint from that
// endpoint alone, as its contract states. On a pool where the fewest requests in flight are found
// early and fit, a pick costs about one load per endpoint. No allocation in steady state (the
// scratch buffers grow only with the pool). pick() never throws.
//
// Thread safety: thread-compatible. The cursor is state: give each dispatching thread its own
// picker, or call pick() under the host's lock. pick() calls no host code but the detector's
// const, noexcept filter() and room() (which take no host lock), so it is safe under one.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// How a file asks the picker to route (flowControl.routing): kInFlight, the rules without 4a;
// kPriority, with rule 4a (EndpointPickerOptions::priorityRouting).
enum class Routing : std::uint8_t { kInFlight, kPriority };

struct EndpointPickerOptions {
  // Rule 3: prefer endpoints where the request starts now (a free slot and KV for its input).
  bool fitFirst = false;
  // Rule 4a: prefer endpoints with the fewest requests in flight of the request's priority or
  // above (the file's flowControl.routing: priority). Meant for servers that preempt by priority.
  bool priorityRouting = false;
};

class HOLDBACK_API EndpointPicker {
 public:
  // `capacity`: the expected pool size (the scratch buffers are sized once).
  explicit EndpointPicker(std::size_t capacity = 0, EndpointPickerOptions options = {});

  // The index (into `endpoints`) of the endpoint to dispatch to; nullopt only for an empty pool.
  // `up`, when not empty, holds one flag per endpoint (non-zero: its last scrape succeeded).
  // `startTokens`: the KV tokens the request needs to start (its input; rule 3); <= 0 needs a
  // free slot only. `inFlightAtOrAbove`: with priorityRouting, one count per endpoint of the
  // requests in flight of the request's priority or above (rule 4a); ignored otherwise, or when
  // shorter than `endpoints`.
  [[nodiscard]] std::optional<std::size_t> pick(
      std::span<const Endpoint> endpoints, const SaturationDetector& detector, TimePoint now,
      std::span<const std::uint8_t> up = {}, std::int64_t startTokens = 0,
      std::span<const std::int64_t> inFlightAtOrAbove = {}) noexcept;

  [[nodiscard]] const EndpointPickerOptions& options() const noexcept { return options_; }

  // Where the next tie-break starts (for tests and diagnostics).
  [[nodiscard]] std::size_t cursor() const noexcept { return cursor_; }

 private:
  // Rule 2 when the other rules picked an endpoint that cannot hold the request.
  std::size_t pickAmongHolders(std::span<const Endpoint> endpoints,
                               const SaturationDetector& detector, TimePoint now,
                               std::span<const std::uint8_t> up, std::int64_t startTokens,
                               std::span<const std::int64_t> above, std::size_t fallback) noexcept;

  void markKept(std::span<const Endpoint> endpoints, const SaturationDetector& detector,
                TimePoint now) noexcept;

  std::vector<std::size_t> scratch_;
  std::vector<std::uint8_t> kept_;  // the whole pool's filter, when read in one call
  std::vector<EndpointRoom> room_;  // fitFirst: the detector's room per endpoint
  std::size_t cursor_ = 0;
  EndpointPickerOptions options_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/endpoint_picker-inl.hpp"
#endif
