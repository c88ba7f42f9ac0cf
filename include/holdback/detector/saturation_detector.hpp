// SaturationDetector: how full the pool is, and which endpoints may take more work.
//
// The host fills an Endpoint snapshot (holdback/core/endpoint.hpp) per model server from its own
// telemetry (scraped vLLM metrics, in-flight counters, ...) and hands a span of them, plus `now`
// from its own clock, to the detector. Detectors never read the system clock, never allocate in
// steady state and never throw.
//
//   saturation(endpoints, now)  aggregate pool saturation: < 1.0 is the fraction of capacity in
//                               use, >= 1.0 is saturated, > 1.0 measures overload (not clamped).
//                               Always finite and >= 0. An empty pool reads 1.0.
//   filter(endpoints, now, out) which endpoints a scheduler may still route to; writes their
//                               indices into `out` and says whether it failed open.
//   room(endpoints, now, out)   optional: each endpoint's free capacity before the detector's
//                               limits, in slots and KV tokens (holdback/core/capacity.hpp); the
//                               flow controller sizes a reserve from it and the EndpointPicker's
//                               fit test reads it. The default reports no capacity model.
//   staleEndpoints(endpoints, now)
//                               optional: how many endpoints the detector cannot use because
//                               their telemetry is missing, too old or invalid (the flow
//                               controller counts cycles gated with every endpoint stale,
//                               FlowControllerStats::staleGatedCycles). The default: 0.
//   filtersEachEndpointAlone()  optional: whether filter() decides each endpoint from its own
//                               telemetry alone (the EndpointPicker then asks it about one
//                               endpoint at a time). The default: false.
//
// Capabilities a host reads instead of casting to a concrete detector (each optional, with a
// default that means "the detector has none"):
//   metricsStalenessThreshold() the age beyond which scraped metrics are stale, for a detector
//                               that reads scraped telemetry (a host warns when it scrapes less
//                               often, and exports the stale-endpoints gauge); nullopt: none.
//   configuredEndpointSlots()   the running-request slots per endpoint the detector's options
//                               declare (a host's dispatch ledger assumes them for an endpoint
//                               that reports none); 0: none declared.
//   endpointScore(endpoint, now) one endpoint's score before the pool's aggregation (e.g. 1.6
//                               for an overloaded one); nullopt: no per-endpoint score, or the
//                               endpoint is stale or invalid.
//
// Thread safety: implementations are thread-safe (saturation and filter may be called
// concurrently).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "holdback/core/capacity.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct FilterResult {
  // Number of indices written to `out`.
  std::size_t kept = 0;
  // True when no endpoint passed and the original list was returned instead.
  bool failOpen = false;
};

class HOLDBACK_API SaturationDetector {
 public:
  virtual ~SaturationDetector() = default;
  SaturationDetector(const SaturationDetector&) = delete;
  SaturationDetector& operator=(const SaturationDetector&) = delete;

  [[nodiscard]] virtual double saturation(std::span<const Endpoint> endpoints,
                                          TimePoint now) const noexcept = 0;

  // Writes the indices (into `endpoints`) of the endpoints that may take more work into `out`,
  // in order. `out` should hold endpoints.size() elements; at most out.size() are written.
  virtual FilterResult filter(std::span<const Endpoint> endpoints, TimePoint now,
                              std::span<std::size_t> out) const noexcept = 0;

  // Writes endpoints[i]'s free capacity into out[i] (at most out.size() of them) and returns
  // true; returns false, writing nothing, when the detector has no capacity model (the default).
  // A stale or invalid endpoint has no room ({0, 0}); +infinity marks a resource the detector
  // does not count. A detector whose KV room stops at a threshold below the cache's size also
  // writes the rest of the whole cache (EndpointRoom::kvCapacityLeft, core/capacity.hpp). Same
  // contract as saturation(): pure, no allocation, no throw.
  virtual bool room(std::span<const Endpoint> /*endpoints*/, TimePoint /*now*/,
                    std::span<EndpointRoom> /*out*/) const noexcept {
    return false;
  }

  // How many of `endpoints` this detector cannot use at `now` because their telemetry is missing
  // (no updateTime), older than its staleness threshold or invalid. The default (a detector that
  // reads no scraped telemetry, e.g. in-flight counts only): 0. Pure, no allocation, no throw.
  [[nodiscard]] virtual std::size_t staleEndpoints(std::span<const Endpoint> /*endpoints*/,
                                                   TimePoint /*now*/) const noexcept {
    return 0;
  }

  // True when filter() decides each endpoint from that endpoint's telemetry and `now` alone and
  // writes the indices it keeps in increasing order: an endpoint it keeps in one list it keeps in
  // any list, alone too, and the one pool-wide rule is failing open when it keeps none. The
  // EndpointPicker then calls filter() on one endpoint at a time, only for the endpoints that
  // could win its pick, instead of once over the pool. The default: false.
  [[nodiscard]] virtual bool filtersEachEndpointAlone() const noexcept { return false; }

  // Capabilities (see the file comment). Pure, no allocation, no throw.
  [[nodiscard]] virtual std::optional<Duration> metricsStalenessThreshold() const noexcept {
    return std::nullopt;
  }
  [[nodiscard]] virtual std::int64_t configuredEndpointSlots() const noexcept { return 0; }
  [[nodiscard]] virtual std::optional<double> endpointScore(const Endpoint& /*endpoint*/,
                                                            TimePoint /*now*/) const noexcept {
    return std::nullopt;
  }

  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  [[nodiscard]] std::string_view name() const noexcept { return name_; }

 protected:
  explicit SaturationDetector(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
