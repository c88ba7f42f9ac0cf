// The concurrency-detector: open loop, the requests and tokens the gateway itself has in flight
// per endpoint, against a configured per-endpoint capacity. Part of the built-in detectors
// (holdback/detector/detectors.hpp, which also declares the utilization-detector); kept in its
// own header by concern. The contract of saturation(), filter() and room() is the one stated at
// the top of detectors.hpp: pure, no clock, no allocation, no lock, no throw.
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "holdback/core/diagnostics.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// concurrency-detector

enum class ConcurrencyMode : std::uint8_t {
  kRequests,  // in-flight requests against maxConcurrency per endpoint
  kTokens,    // in-flight tokens against maxTokenConcurrency per endpoint
  kHybrid,    // per-endpoint roofline of both, averaged with equal weight
};

[[nodiscard]] HOLDBACK_API std::string_view toString(ConcurrencyMode mode) noexcept;

struct ConcurrencyDetectorOptions {
  ConcurrencyMode mode = ConcurrencyMode::kRequests;
  // Per-endpoint capacity in requests; > 0. Upstream advice: ~110% of the engine's max batch.
  std::int64_t maxConcurrency = 100;
  // Per-endpoint capacity in tokens; > 0.
  std::int64_t maxTokenConcurrency = 1'000'000;
  // Burst allowance of the filter, as a fraction; finite and >= 0 (> 1 warns).
  double headroom = 0.0;
  // Mixed pools: true takes each endpoint's own capacity where the host knows it
  // (Endpoint::maxRunningRequests for requests, Endpoint::kvCapacityTokens for tokens, when
  // > 0) instead of maxConcurrency / maxTokenConcurrency, which stay the fallback. false (the
  // default): the configured values for every endpoint.
  bool endpointCapacity = false;
};

// The algorithm
//   Reads Endpoint::inFlightRequests and Endpoint::inFlightTokens, which the host fills (for
//   example from an InFlightTracker, see in_flight_tracker.hpp). Metric timestamps are ignored:
//   the counts are the gateway's own and never stale. A negative count is invalid telemetry: the
//   endpoint counts as exactly full (its capacity in the aggregate, score 1.0 in hybrid) and the
//   filter never keeps it. Sums are taken in double, so no count wraps.
//
//   Each endpoint's capacity: R = maxConcurrency and T = maxTokenConcurrency, or with
//   endpointCapacity its own Endpoint::maxRunningRequests / kvCapacityTokens where > 0.
//
//   saturation(endpoints, now):
//     empty list -> 1.0
//     requests   sum(inFlightRequests) / sum(R)
//     tokens     sum(inFlightTokens)   / sum(T)
//     hybrid     mean over endpoints of max(requests / R, tokens / T)
//   requests/tokens are one aggregate fraction (an idle endpoint's spare capacity offsets an
//   overloaded one; in a mixed pool each endpoint weighs its capacity); hybrid is a per-endpoint
//   roofline, every endpoint weighing the same.
//
//   filter(endpoints, now, out): limits truncated toward zero,
//     reqLimit = trunc(R * (1 + headroom)), tokLimit likewise;
//     keeps requests < reqLimit (requests), tokens < tokLimit (tokens), or both (hybrid).
//   There is NO fail-open: the result may be empty, and failOpen is always false. At most
//   out.size() indices are written (the first ones).
//
//   room(endpoints, now, out): slots = R - inFlightRequests (requests, hybrid) and
//   KV = T - inFlightTokens (tokens, hybrid), each floored at 0; the resource a
//   mode does not count is +infinity. An endpoint with a negative count has no room.
//
// Thread safety: thread-safe (immutable after creation). saturation, filter and room are O(n),
// do not allocate and do not throw.
class HOLDBACK_API ConcurrencyDetector final : public SaturationDetector {
 public:
  static constexpr std::string_view kType = "concurrency-detector";

  static Result<std::unique_ptr<ConcurrencyDetector>> create(
      ConcurrencyDetectorOptions options = {}, std::string name = std::string(kType));
  static void validate(const ConcurrencyDetectorOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  [[nodiscard]] double saturation(std::span<const Endpoint> endpoints,
                                  TimePoint now) const noexcept override;
  FilterResult filter(std::span<const Endpoint> endpoints, TimePoint now,
                      std::span<std::size_t> out) const noexcept override;
  bool room(std::span<const Endpoint> endpoints, TimePoint now,
            std::span<EndpointRoom> out) const noexcept override;
  // The filter keeps each endpoint on its own telemetry (and `now`) alone.
  [[nodiscard]] bool filtersEachEndpointAlone() const noexcept override { return true; }

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] const ConcurrencyDetectorOptions& options() const noexcept { return options_; }

  // A truncated filter limit; `unbounded` when it exceeds what an int64 count can reach.
  struct Limit {
    std::int64_t value = 0;
    bool unbounded = false;
    [[nodiscard]] constexpr bool admits(std::int64_t load) const noexcept {
      return unbounded || load < value;
    }
  };
  [[nodiscard]] Limit requestLimit() const noexcept { return request_limit_; }
  [[nodiscard]] Limit tokenLimit() const noexcept { return token_limit_; }

 private:
  ConcurrencyDetector(ConcurrencyDetectorOptions options, std::string name);

  ConcurrencyDetectorOptions options_;
  Limit request_limit_;
  Limit token_limit_;

  // Endpoint e's capacity R and T (endpointCapacity), and its filter limits.
  [[nodiscard]] double requestCapacity(const Endpoint& e) const noexcept {
    return options_.endpointCapacity && e.maxRunningRequests > 0
               ? static_cast<double>(e.maxRunningRequests)
               : static_cast<double>(options_.maxConcurrency);
  }
  [[nodiscard]] double tokenCapacity(const Endpoint& e) const noexcept {
    return options_.endpointCapacity && e.kvCapacityTokens > 0
               ? static_cast<double>(e.kvCapacityTokens)
               : static_cast<double>(options_.maxTokenConcurrency);
  }
  [[nodiscard]] Limit limitFor(Limit configured, std::int64_t own) const noexcept {
    if (!options_.endpointCapacity || own <= 0) return configured;
    const double limit = static_cast<double>(own) * (1.0 + options_.headroom);
    if (limit >= 9223372036854775808.0) return {std::numeric_limits<std::int64_t>::max(), true};
    return {static_cast<std::int64_t>(limit), false};  // truncated toward zero
  }
};

// ---------------------------------------------------------------------------------------------
// Hot paths (inline, as the policies' compute()).

inline double ConcurrencyDetector::saturation(std::span<const Endpoint> endpoints,
                                              TimePoint /*now*/) const noexcept {
  if (endpoints.empty()) return 1.0;
  double requests = 0.0;
  double tokens = 0.0;
  double hybrid = 0.0;
  double request_capacity = 0.0;
  double token_capacity = 0.0;
  for (const Endpoint& e : endpoints) {
    const double max_requests = requestCapacity(e);
    const double max_tokens = tokenCapacity(e);
    request_capacity += max_requests;
    token_capacity += max_tokens;
    // Negative counts are invalid: the endpoint counts as exactly full.
    const double r =
        e.inFlightRequests < 0 ? max_requests : static_cast<double>(e.inFlightRequests);
    const double t = e.inFlightTokens < 0 ? max_tokens : static_cast<double>(e.inFlightTokens);
    requests += r;
    tokens += t;
    const double rr = r / max_requests;
    const double tr = t / max_tokens;
    hybrid += rr > tr ? rr : tr;
  }
  const double n = static_cast<double>(endpoints.size());
  switch (options_.mode) {
    case ConcurrencyMode::kRequests:
      return requests / request_capacity;
    case ConcurrencyMode::kTokens:
      return tokens / token_capacity;
    case ConcurrencyMode::kHybrid:
      return hybrid / n;
  }
  return 1.0;
}

inline FilterResult ConcurrencyDetector::filter(std::span<const Endpoint> endpoints,
                                                TimePoint /*now*/,
                                                std::span<std::size_t> out) const noexcept {
  FilterResult result;
  for (std::size_t i = 0; i < endpoints.size() && result.kept < out.size(); ++i) {
    const Endpoint& e = endpoints[i];
    if (e.inFlightRequests < 0 || e.inFlightTokens < 0) continue;
    const Limit requests = limitFor(request_limit_, e.maxRunningRequests);
    const Limit tokens = limitFor(token_limit_, e.kvCapacityTokens);
    bool keep = false;
    switch (options_.mode) {
      case ConcurrencyMode::kRequests:
        keep = requests.admits(e.inFlightRequests);
        break;
      case ConcurrencyMode::kTokens:
        keep = tokens.admits(e.inFlightTokens);
        break;
      case ConcurrencyMode::kHybrid:
        keep = requests.admits(e.inFlightRequests) && tokens.admits(e.inFlightTokens);
        break;
    }
    if (keep) out[result.kept++] = i;
  }
  return result;
}

inline bool ConcurrencyDetector::room(std::span<const Endpoint> endpoints, TimePoint /*now*/,
                                      std::span<EndpointRoom> out) const noexcept {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool slots = options_.mode != ConcurrencyMode::kTokens;
  const bool tokens = options_.mode != ConcurrencyMode::kRequests;
  const std::size_t n = endpoints.size() < out.size() ? endpoints.size() : out.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Endpoint& e = endpoints[i];
    EndpointRoom r;
    if (e.inFlightRequests >= 0 && e.inFlightTokens >= 0) {
      r.slots = slots ? requestCapacity(e) - static_cast<double>(e.inFlightRequests) : kInf;
      r.kvTokens = tokens ? tokenCapacity(e) - static_cast<double>(e.inFlightTokens) : kInf;
      if (!(r.slots > 0.0)) r.slots = 0.0;
      if (!(r.kvTokens > 0.0)) r.kvTokens = 0.0;
    }
    out[i] = r;
  }
  return true;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/concurrency_detector-inl.hpp"
#endif
