// The built-in saturation detectors.
//
//   utilization-detector   closed loop: a roofline over scraped telemetry (waiting queue depth and
//                          KV-cache usage) per endpoint, aggregated over the pool (the default)
//   concurrency-detector   open loop: the requests and tokens the gateway itself has in flight
//                          per endpoint, against a configured per-endpoint capacity
//                          (declared in holdback/detector/concurrency_detector.hpp, included here)
//
// Each detector is created from a plain options struct (designated initializers) through
// create(), which validates the options and returns every problem at once; or from JSON through
// the detector registry (config/detector_config.hpp). Constructors are private: a detector with
// an invalid threshold (zero, negative, NaN, ...) cannot exist.
//
// saturation() and filter() are pure functions of the endpoint span and `now`: they read no
// clock, allocate nothing, take no lock and never throw. Their results are always finite and
// >= 0, whatever the telemetry (NaN, infinities, negative or huge values, timestamps anywhere).
// See docs/guide/detectors.md for formulas, trade-offs and how to feed them from vLLM.
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "holdback/core/diagnostics.hpp"
#include "holdback/detector/concurrency_detector.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// utilization-detector

// How per-endpoint scores become the pool's saturation.
enum class Aggregation : std::uint8_t {
  kMean,      // unweighted mean (the reference): every endpoint counts the same
  kMax,       // the most loaded endpoint
  kWeighted,  // mean weighted by Endpoint::weight (mixed pools, e.g. H100 = 4, L4 = 1)
  kCapacity,  // mean weighted by each endpoint's slots (Endpoint::maxRunningRequests): a pool's
              // share of busy slots in mixed pools; the same as kMean when all weigh the same
};

// What a stale endpoint (metrics missing or older than the staleness threshold) contributes.
enum class StalenessPolicy : std::uint8_t {
  kSaturated,  // scores exactly 1.0 (fail closed; the reference's behaviour)
  kIgnore,     // leaves the aggregate; an all-stale pool reads 0.0 (fails open)
};

// Which readings count as invalid telemetry, and what an invalid endpoint contributes.
enum class TelemetryValidation : std::uint8_t {
  // NaN / infinite / negative queue, KV usage outside [0, 1], and (with the slot term) NaN /
  // infinite / negative running counts are invalid; an invalid endpoint is handled like a stale
  // one, per the staleness policy. The default: a misreporting server cannot close the pool.
  kStrict,
  // holdback 0.1 / the reference: only NaN / infinite / negative queue or KV readings are
  // invalid, and they score exactly 1.0 whatever the staleness policy; KV usage above 1 (e.g. a
  // percentage, 50 instead of 0.5) scores as given (62.5 with the default threshold).
  kReference,
};

[[nodiscard]] HOLDBACK_API std::string_view toString(Aggregation aggregation) noexcept;
[[nodiscard]] HOLDBACK_API std::string_view toString(TelemetryValidation validation) noexcept;
[[nodiscard]] HOLDBACK_API std::string_view toString(StalenessPolicy policy) noexcept;

struct UtilizationDetectorOptions {
  // The "ideal" waiting queue depth of one endpoint; > 0.
  std::int64_t queueDepthThreshold = 5;
  // The target KV-cache usage, as a fraction; in (0, 1].
  double kvCacheUtilThreshold = 0.8;
  // Metrics older than this are stale; > 0.
  Duration metricsStalenessThreshold = std::chrono::milliseconds(200);
  // Burst allowance of the filter above the thresholds, as a fraction; finite and >= 0 (> 1 is
  // accepted with a warning).
  double headroom = 0.0;
  Aggregation aggregation = Aggregation::kMean;
  StalenessPolicy stalenessPolicy = StalenessPolicy::kSaturated;
  // The slot term: > 0 adds runningRequests / maxRunningRequests (vLLM's --max-num-seqs) to the
  // roofline, so that a score below 1 means a slot is free. 0 = off (the reference); >= 0.
  std::int64_t maxRunningRequests = 0;
  // The slot term also for every endpoint whose slots the host knows (Endpoint::
  // maxRunningRequests > 0: configured, or learned by the dispatch ledger), without
  // maxRunningRequests; an endpoint of unknown slots then scores by queue and KV alone. false =
  // the slot term only with maxRunningRequests (the reference).
  bool endpointCapacity = false;
  TelemetryValidation telemetryValidation = TelemetryValidation::kStrict;
  // The most one endpoint's score counts in the aggregate: > 0 (NaN is invalid), or
  // UtilizationDetector::kUncapped (the reference). With the default 1.0 an overloaded endpoint
  // counts as exactly full, so a pool with an idle endpoint reads < 1 under mean or weighted
  // aggregation; the overload stays visible in endpointScore().
  double endpointScoreCap = 1.0;
  // The room (room()): true reports the rest of the whole KV cache (EndpointRoom::kvCapacityLeft)
  // where the capacity is known, so that a lower band's request may start below the threshold
  // and run past it, as this detector admits work below its threshold (core/capacity.hpp). false:
  // a request's whole footprint must fit below the threshold; for several gateway replicas,
  // which can each start one past it on the same endpoint between two syncs.
  bool kvStartPastThreshold = true;
  // (The dispatch ledger a host feeds beside this detector is configured apart from it:
  // DispatchLedgerOptions, flowControl.dispatchLedger in a file, config::ConfigBundle.)
};

// The algorithm
//   Each endpoint is first classified:
//     fresh    updateTime is set, -T <= now - updateTime <= T (T = metricsStalenessThreshold;
//              a scrape that landed slightly after `now` was read is fresh), and its telemetry
//              is valid (below);
//     stale    updateTime is unset (no metrics yet) or now - updateTime > T (strictly);
//     invalid  updateTime more than T in the future (or so far from `now` that the difference
//              overflows), or invalid telemetry: NaN / infinite / negative waitingQueueSize or
//              kvCacheUsage; with telemetryValidation strict (the default) also kvCacheUsage
//              above 1, and, when the slot term is on, NaN / infinite / negative
//              runningRequests.
//   score(e) = max(waitingQueueSize / queueDepthThreshold, kvCacheUsage / kvCacheUtilThreshold
//                  [, runningRequests / M when the slot term is on (maxRunningRequests > 0)])
//   with M = Endpoint::maxRunningRequests when > 0 (the endpoint's own slots, mixed pools), else
//   the option's maxRunningRequests
//   for a fresh endpoint (capped at kMaxScore so that sums stay finite); a stale one scores 1.0
//   (stalenessPolicy saturated) or leaves the aggregate (ignore); an invalid one is handled like
//   a stale one (strict) or scores exactly 1.0 whatever the policy (reference). Each score then
//   counts at most endpointScoreCap in the aggregate (default 1.0; kUncapped = the reference).
//
//   saturation(endpoints, now):
//     empty list                                  -> 1.0
//     every endpoint left the aggregate (ignore)  -> 0.0
//     mean      sum(score) / count
//     max       max(score)
//     weighted  sum(w * score) / sum(w), w = Endpoint::weight when finite and >= 0 (capped at
//               kMaxWeight), else 1.0; sum(w) == 0 (all zero weights) -> 1.0 (no capacity)
//     capacity  sum(c * score) / sum(c), c = Endpoint::maxRunningRequests when > 0, else the
//               slot term's maxRunningRequests when > 0, else 1; when every counted endpoint has
//               the same c, exactly the mean (so a pool of one size reads as under mean)
//   Values above 1.0 are kept: they measure overload.
//
//   filter(endpoints, now, out): keeps, in order, each fresh endpoint with
//     waitingQueueSize < queueDepthThreshold * (1 + headroom)
//     kvCacheUsage     < min(1.0, kvCacheUtilThreshold * (1 + headroom))   (strict <)
//   Stale and invalid endpoints are never kept (whatever the staleness policy). When nothing is
//   kept from a non-empty list, every index is written and failOpen is true (the scheduler's
//   scorers then pick the least-bad endpoint). An empty list keeps nothing and does not fail open.
//   At most out.size() indices are written (the first ones); failOpen still says whether any
//   endpoint passed.
//
//   room(endpoints, now, out): each fresh endpoint's free capacity before the detector's limits
//   (holdback/core/capacity.hpp); a stale or invalid one has none ({0, 0}).
//     slots   0 when a request waits (waitingQueueSize >= 0.5: a new one would queue behind
//             it), else M - runningRequests with M = Endpoint::maxRunningRequests, or the slot
//             term's maxRunningRequests, when known; unknown M: +infinity (not counted)
//     KV      (kvCacheUtilThreshold - kvCacheUsage) x Endpoint::kvCapacityTokens when the
//             capacity is known; unknown: 0 at or above the threshold, else +infinity
//     kvCapacityLeft  (1 - kvCacheUsage) x Endpoint::kvCapacityTokens when the capacity is
//             known and kvStartPastThreshold is on, else 0: a lower band's request may start
//             below the threshold and run past it within the cache, as this detector admits work
//             below its threshold
//   each floored at 0.
//
// Thread safety: thread-safe (immutable after creation). saturation, filter and room are O(n),
// do not allocate and do not throw.
class HOLDBACK_API UtilizationDetector final : public SaturationDetector {
 public:
  static constexpr std::string_view kType = "utilization-detector";
  static constexpr double kMaxScore = 1e12;
  static constexpr double kMaxWeight = 1e12;
  static constexpr double kUncapped = std::numeric_limits<double>::infinity();

  // The options of the Go reference's utilization-detector (llm-d-router,
  // https://github.com/llm-d/llm-d-router): reference telemetry
  // validation, no score cap, no slot term. (Go has no dispatch ledger either: the reference
  // profile also turns the host's ledger correction off, config/reference_profile.hpp.)
  [[nodiscard]] static UtilizationDetectorOptions referenceOptions() noexcept {
    UtilizationDetectorOptions o;
    o.telemetryValidation = TelemetryValidation::kReference;
    o.endpointScoreCap = kUncapped;
    return o;
  }

  static Result<std::unique_ptr<UtilizationDetector>> create(
      UtilizationDetectorOptions options = {}, std::string name = std::string(kType));
  // Appends one diagnostic per invalid field (and a warning for headroom > 1); `path` is the
  // JSON pointer of the parameters object.
  static void validate(const UtilizationDetectorOptions& options, const std::string& path,
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
  [[nodiscard]] const UtilizationDetectorOptions& options() const noexcept { return options_; }
  // The filter's limits: queueDepthThreshold * (1 + headroom) and
  // min(1.0, kvCacheUtilThreshold * (1 + headroom)).
  [[nodiscard]] double queueLimit() const noexcept { return queue_limit_; }
  [[nodiscard]] double kvCacheLimit() const noexcept { return kv_limit_; }

  // The endpoints observe() classifies as stale or invalid (what StaleEndpointMonitor counts).
  [[nodiscard]] std::size_t staleEndpoints(std::span<const Endpoint> endpoints,
                                           TimePoint now) const noexcept override;

  enum class Observation : std::uint8_t { kFresh, kStale, kInvalid };
  // How saturation() and filter() classify one endpoint (see "The algorithm").
  [[nodiscard]] Observation observe(const Endpoint& endpoint, TimePoint now) const noexcept;
  // One fresh endpoint's roofline score before the cap (its overload, e.g. 1.6); nullopt when
  // it is stale or invalid.
  [[nodiscard]] std::optional<double> endpointScore(const Endpoint& endpoint,
                                                    TimePoint now) const noexcept override;

  // Capabilities (detector/saturation_detector.hpp): metricsStalenessThreshold and the slot
  // term's maxRunningRequests (0 = off).
  [[nodiscard]] std::optional<Duration> metricsStalenessThreshold() const noexcept override {
    return options_.metricsStalenessThreshold;
  }
  [[nodiscard]] std::int64_t configuredEndpointSlots() const noexcept override {
    return options_.maxRunningRequests;
  }

 private:
  UtilizationDetector(UtilizationDetectorOptions options, std::string name);

  UtilizationDetectorOptions options_;
  double queue_threshold_ = 5.0;  // as a double, converted once
  std::int64_t staleness_ns_ = 0;
  double queue_limit_ = 5.0;
  double kv_limit_ = 0.8;
  double max_running_ = 0.0;  // 0 = no slot term
  double score_cap_ = 1.0;

  [[nodiscard]] double rawScore(const Endpoint& e) const noexcept;
  // Whether the slot term scores `e`: maxRunningRequests is set, or (endpointCapacity) e's own
  // slots are known.
  [[nodiscard]] bool slotTermFor(const Endpoint& e) const noexcept {
    return max_running_ > 0.0 || (options_.endpointCapacity && e.maxRunningRequests > 0);
  }
};

// ---------------------------------------------------------------------------------------------
// Hot paths (inline, as the policies' compute()).

namespace detail {

[[nodiscard]] constexpr bool isValidTelemetry(double v) noexcept {
  return v >= 0.0 && v <= std::numeric_limits<double>::max();  // false for NaN, inf, negative
}

// Writes 0, 1, ... into `out` (fail-open) and returns how many were written.
inline std::size_t writeAll(std::size_t n, std::span<std::size_t> out) noexcept {
  const std::size_t count = n < out.size() ? n : out.size();
  for (std::size_t i = 0; i < count; ++i) out[i] = i;
  return count;
}

}  // namespace detail

inline UtilizationDetector::Observation UtilizationDetector::observe(const Endpoint& endpoint,
                                                                     TimePoint now) const noexcept {
  if (!endpoint.updateTime) return Observation::kStale;
  // elapsed() saturates: a difference that does not fit an int64 count is invalid telemetry.
  const std::int64_t age = elapsed(*endpoint.updateTime, now).count();
  if (age == Duration::max().count() || age == Duration::min().count()) {
    return Observation::kInvalid;
  }
  if (age > staleness_ns_) return Observation::kStale;
  if (age < -staleness_ns_) return Observation::kInvalid;
  if (!detail::isValidTelemetry(endpoint.waitingQueueSize) ||
      !detail::isValidTelemetry(endpoint.kvCacheUsage)) {
    return Observation::kInvalid;
  }
  if (options_.telemetryValidation == TelemetryValidation::kStrict &&
      (endpoint.kvCacheUsage > 1.0 ||
       (slotTermFor(endpoint) && !detail::isValidTelemetry(endpoint.runningRequests)))) {
    return Observation::kInvalid;
  }
  return Observation::kFresh;
}

inline double UtilizationDetector::rawScore(const Endpoint& e) const noexcept {
  const double queue = e.waitingQueueSize / queue_threshold_;
  const double kv = e.kvCacheUsage / options_.kvCacheUtilThreshold;
  double score = queue > kv ? queue : kv;
  if (slotTermFor(e) && detail::isValidTelemetry(e.runningRequests)) {
    const double m =
        e.maxRunningRequests > 0 ? static_cast<double>(e.maxRunningRequests) : max_running_;
    const double slots = e.runningRequests / m;
    if (slots > score) score = slots;
  }
  if (score > kMaxScore) score = kMaxScore;
  return score + 0.0;  // -0.0 -> +0.0
}

inline std::optional<double> UtilizationDetector::endpointScore(const Endpoint& endpoint,
                                                                TimePoint now) const noexcept {
  if (observe(endpoint, now) != Observation::kFresh) return std::nullopt;
  return rawScore(endpoint);
}

inline double UtilizationDetector::saturation(std::span<const Endpoint> endpoints,
                                              TimePoint now) const noexcept {
  if (endpoints.empty()) return 1.0;
  const bool ignore_stale = options_.stalenessPolicy == StalenessPolicy::kIgnore;
  const bool invalid_is_stale = options_.telemetryValidation == TelemetryValidation::kStrict;
  double sum = 0.0;
  double weight_sum = 0.0;
  double weighted_sum = 0.0;  // capacity: sum(c * score), beside the plain sum
  double first_weight = -1.0;
  bool uniform = true;  // capacity: every counted endpoint has the same c
  double max = 0.0;
  std::size_t counted = 0;
  for (const Endpoint& e : endpoints) {
    const Observation observation = observe(e, now);
    if (ignore_stale && (observation == Observation::kStale ||
                         (observation == Observation::kInvalid && invalid_is_stale))) {
      continue;
    }
    double score = 1.0;
    if (observation == Observation::kFresh) score = rawScore(e);
    if (score > score_cap_) score = score_cap_;
    ++counted;
    switch (options_.aggregation) {
      case Aggregation::kMean:
        sum += score;
        break;
      case Aggregation::kMax:
        if (score > max) max = score;
        break;
      case Aggregation::kWeighted: {
        double w = e.weight;
        if (!detail::isValidTelemetry(w)) w = 1.0;
        if (w > kMaxWeight) w = kMaxWeight;
        sum += w * score;
        weight_sum += w;
        break;
      }
      case Aggregation::kCapacity: {
        double c = 1.0;
        if (e.maxRunningRequests > 0) {
          c = static_cast<double>(e.maxRunningRequests);
        } else if (max_running_ > 0.0) {
          c = max_running_;
        }
        if (first_weight < 0.0) first_weight = c;
        if (c != first_weight) uniform = false;
        sum += score;
        weighted_sum += c * score;
        weight_sum += c;
        break;
      }
    }
  }
  if (counted == 0) return 0.0;  // every endpoint was stale and ignored
  switch (options_.aggregation) {
    case Aggregation::kMean:
      return sum / static_cast<double>(counted);
    case Aggregation::kMax:
      return max;
    case Aggregation::kWeighted:
      return weight_sum > 0.0 ? sum / weight_sum : 1.0;
    case Aggregation::kCapacity:
      return uniform ? sum / static_cast<double>(counted) : weighted_sum / weight_sum;
  }
  return 1.0;
}

inline FilterResult UtilizationDetector::filter(std::span<const Endpoint> endpoints, TimePoint now,
                                                std::span<std::size_t> out) const noexcept {
  FilterResult result;
  bool any = false;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const Endpoint& e = endpoints[i];
    if (observe(e, now) != Observation::kFresh) continue;
    if (!(e.waitingQueueSize < queue_limit_ && e.kvCacheUsage < kv_limit_)) continue;
    any = true;
    if (result.kept == out.size()) break;
    out[result.kept++] = i;
  }
  if (!any && !endpoints.empty()) {
    result.kept = detail::writeAll(endpoints.size(), out);
    result.failOpen = true;
  }
  return result;
}

inline bool UtilizationDetector::room(std::span<const Endpoint> endpoints, TimePoint now,
                                      std::span<EndpointRoom> out) const noexcept {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::size_t n = endpoints.size() < out.size() ? endpoints.size() : out.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Endpoint& e = endpoints[i];
    EndpointRoom r;  // {0, 0}: stale or invalid
    if (observe(e, now) == Observation::kFresh) {
      const double slots =
          e.maxRunningRequests > 0 ? static_cast<double>(e.maxRunningRequests) : max_running_;
      const double running = detail::isValidTelemetry(e.runningRequests) ? e.runningRequests : 0.0;
      if (e.waitingQueueSize >= 0.5) {
        r.slots = 0.0;
      } else {
        r.slots = slots > 0.0 ? slots - running : kInf;
      }
      const double free_kv = options_.kvCacheUtilThreshold - e.kvCacheUsage;
      if (e.kvCapacityTokens > 0) {
        const auto capacity = static_cast<double>(e.kvCapacityTokens);
        r.kvTokens = free_kv * capacity;
        // Below the threshold a request may run past it (capacity.hpp): the whole cache's rest
        // (fresh telemetry is valid; a full or overfull cache is floored to 0 below).
        if (options_.kvStartPastThreshold) r.kvCapacityLeft = (1.0 - e.kvCacheUsage) * capacity;
      } else {
        r.kvTokens = free_kv > 0.0 ? kInf : 0.0;
      }
      if (!(r.slots > 0.0)) r.slots = 0.0;
      if (!(r.kvTokens > 0.0)) r.kvTokens = 0.0;
      if (!(r.kvCapacityLeft > 0.0)) r.kvCapacityLeft = 0.0;
    }
    out[i] = r;
  }
  return true;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/detectors-inl.hpp"
#endif
