// InFlightTracker: the requests and tokens the gateway has dispatched to each endpoint and not yet
// seen finish, by endpoint name, for the concurrency detector (Endpoint::inFlightRequests/Tokens).
//
// A by-name wrapper over DispatchLedger (dispatch_ledger.hpp), the library's one in-flight
// mechanism; InFlightHandle is DispatchHandle. Hosts that also scrape
// telemetry should use the ledger directly (ids instead of names, scrape correction).
//
// The algorithm
//   dispatch(name, tokens) registers `name` on first use and counts one request with `tokens`
//   tokens; the move-only handle gives them back exactly once: through release() (end of stream),
//   or its destructor if the host forgets. releaseTokens() returns the tokens early and keeps the
//   request counted. A moved-from or released handle does nothing.
//
//   fill(endpoints) copies the current counts into each Endpoint by name (unknown names read 0)
//   and touches no other field.
//
//   removeEndpoint(name) drops an endpoint: its counts read 0 at once; handles still outstanding
//   for it complete into the retired slot, so a re-added endpoint of the same name starts from 0
//   and never goes negative.
//
//   With priority levels (the constructor's DispatchLedgerOptions::priorityLevels),
//   dispatch(name, tokens, priority) also counts the request at its priority's level, and
//   inFlightAtOrAbove(endpoints, priority, out) reads each endpoint's requests in flight of that
//   priority or above (EndpointPicker's priority routing; DispatchLedger, "Requests in flight by
//   priority").
//
//   Negative token counts count as 0 (more than DispatchLedger::kMaxTokensPerRequest as that).
//
// Locking: a shared lock over the ledger's name index per call (exclusive for the first dispatch
// to a new name and for removeEndpoint); counters are per-endpoint atomics.
//
// Lifetime: release (or destroy) handles before the tracker.
// Thread safety: thread-safe. dispatch() allocates only for the first request to a new endpoint
// name; release, fill, load and inFlightAtOrAbove do not allocate. Nothing throws: should that
// first allocation fail (or the ledger be full), dispatch() returns an inactive handle and counts
// nothing.
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

using InFlightHandle = DispatchHandle;

class HOLDBACK_API InFlightTracker {
 public:
  InFlightTracker() = default;
  // `options.priorityLevels`: count requests in flight by priority (see the header comment).
  explicit InFlightTracker(DispatchLedgerOptions options) : ledger_(std::move(options)) {}

  // Counts one request with `tokens` tokens (negative -> 0) on `endpoint`.
  InFlightHandle dispatch(std::string_view endpoint, std::int64_t tokens = 0) noexcept;
  // The same, counted at `priority`'s level too (with priority levels).
  InFlightHandle dispatch(std::string_view endpoint, std::int64_t tokens,
                          Priority priority) noexcept;

  // The current counts of `endpoint` (0, 0 when unknown).
  [[nodiscard]] InFlightLoad load(std::string_view endpoint) const noexcept {
    return ledger_.load(endpoint);
  }

  // Sets inFlightRequests and inFlightTokens of every endpoint from its name.
  void fill(std::span<Endpoint> endpoints) const noexcept { ledger_.fillInFlight(endpoints); }

  // out[k] = endpoints[k]'s requests in flight of `priority` or above, by name (0: unknown, or
  // no priority levels).
  void inFlightAtOrAbove(std::span<const Endpoint> endpoints, Priority priority,
                         std::span<std::int64_t> out) const noexcept {
    ledger_.inFlightAtOrAbove(endpoints, priority, out);
  }

  // Forgets `endpoint`'s counters (see the header comment). Returns false when it was unknown.
  bool removeEndpoint(std::string_view endpoint) noexcept {
    return ledger_.removeEndpoint(endpoint);
  }

  // The ledger underneath (e.g. to install scrapes for the same endpoints).
  [[nodiscard]] DispatchLedger& ledger() noexcept { return ledger_; }

 private:
  InFlightHandle dispatchAt(std::string_view endpoint, std::int64_t tokens,
                            std::optional<Priority> priority) noexcept;
  DispatchLedger ledger_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/in_flight_tracker-inl.hpp"
#endif
