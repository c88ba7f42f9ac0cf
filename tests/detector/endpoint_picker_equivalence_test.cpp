// EndpointPicker's fit path reads room lazily (one endpoint at a time, the whole pool after a
// few): its picks, cursor included, must be those of the rule read eagerly (the whole pool's
// room in one call, then one pass over the candidates by the tuple of rules 2-6), on random pools
// with both detectors, endpoints down, NaN queues and a detector without a capacity model.
#include "holdback/detector/endpoint_picker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

// The rule as endpoint_picker.hpp states it, read eagerly (the picker's earlier implementation).
class EagerPickerReference {
 public:
  std::optional<std::size_t> pick(std::span<const Endpoint> endpoints,
                                  const SaturationDetector& detector, TimePoint now,
                                  std::span<const std::uint8_t> up, std::int64_t startTokens,
                                  bool fitFirst) {
    const std::size_t n = endpoints.size();
    if (n == 0) return std::nullopt;
    std::vector<std::size_t> candidates(n);
    std::size_t kept = detector.filter(endpoints, now, candidates).kept;
    if (kept == 0) {
      for (std::size_t i = 0; i < n; ++i) candidates[i] = i;
      kept = n;
    }
    const bool useUp = up.size() >= n;
    if (cursor_ >= n) cursor_ = 0;
    const double tokens = startTokens > 0 ? static_cast<double>(startTokens) : 0.0;
    std::vector<EndpointRoom> room(n);
    const bool fit = fitFirst && detector.room(endpoints, now, room);
    auto key = [&](std::size_t i) {
      const bool down = useUp && up[i] == 0;
      const bool waits = fit && !(room[i].slots >= 1.0 && room[i].kvTokens >= tokens);
      const std::size_t distance = i >= cursor_ ? i - cursor_ : i + n - cursor_;
      return std::make_tuple(down, waits, endpoints[i].inFlightRequests,
                             endpoints[i].waitingQueueSize, distance);
    };
    std::size_t best = candidates[0];
    auto bestKey = key(best);
    for (std::size_t k = 1; k < kept; ++k) {
      const auto candidate = key(candidates[k]);
      if (candidate < bestKey) {
        best = candidates[k];
        bestKey = candidate;
      }
    }
    cursor_ = best + 1 == n ? 0 : best + 1;
    return best;
  }

 private:
  std::size_t cursor_ = 0;
};

// A detector that keeps every endpoint and has no capacity model.
class KeepAllDetector final : public SaturationDetector {
 public:
  KeepAllDetector() : SaturationDetector("keep-all") {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return 0.0; }
  FilterResult filter(std::span<const Endpoint> endpoints, TimePoint,
                      std::span<std::size_t> out) const noexcept override {
    FilterResult r;
    for (std::size_t i = 0; i < endpoints.size() && i < out.size(); ++i) out[r.kept++] = i;
    return r;
  }
  std::string_view type() const noexcept override { return "keep-all"; }
};

void expectSamePicks(const SaturationDetector& detector, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const TimePoint now = TimePoint{} + std::chrono::hours(1);
  EndpointPicker picker(0, {.fitFirst = true});
  EagerPickerReference reference;
  for (int round = 0; round < 300; ++round) {
    const std::size_t n = 1 + rng() % (round % 10 == 0 ? 300 : 12);
    std::vector<Endpoint> endpoints(n);
    std::vector<std::uint8_t> up(n);
    for (std::size_t i = 0; i < n; ++i) {
      Endpoint& e = endpoints[i];
      e.updateTime = now - std::chrono::milliseconds(rng() % 300);  // some stale (> 200 ms)
      e.waitingQueueSize = rng() % 7 == 0 ? std::numeric_limits<double>::quiet_NaN()
                                          : static_cast<double>(rng() % 3);
      e.kvCacheUsage = static_cast<double>(rng() % 100) / 100.0;
      e.runningRequests = static_cast<double>(rng() % 9);
      e.maxRunningRequests = 8;
      e.kvCapacityTokens = 4096;
      e.inFlightRequests = static_cast<std::int64_t>(rng() % 6);
      e.inFlightTokens = static_cast<std::int64_t>(rng() % 5000);
      up[i] = rng() % 5 == 0 ? 0 : 1;
    }
    const std::span<const std::uint8_t> ups =
        round % 3 == 0 ? std::span<const std::uint8_t>() : std::span<const std::uint8_t>(up);
    const auto tokens = static_cast<std::int64_t>(rng() % 1500);
    ASSERT_EQ(picker.pick(endpoints, detector, now, ups, tokens),
              reference.pick(endpoints, detector, now, ups, tokens, true))
        << "seed " << seed << " round " << round << " n " << n;
  }
}

TEST(EndpointPickerEquivalenceTest, UtilizationDetector) {
  auto detector = std::move(UtilizationDetector::create({.maxRunningRequests = 8})).value();
  for (std::uint32_t seed = 1; seed <= 5; ++seed) expectSamePicks(*detector, seed);
}

TEST(EndpointPickerEquivalenceTest, HybridConcurrencyDetector) {
  auto detector = std::move(ConcurrencyDetector::create({.mode = ConcurrencyMode::kHybrid,
                                                         .maxConcurrency = 4,
                                                         .maxTokenConcurrency = 4096}))
                      .value();
  for (std::uint32_t seed = 1; seed <= 5; ++seed) expectSamePicks(*detector, seed);
}

TEST(EndpointPickerEquivalenceTest, DetectorWithoutCapacityModel) {
  const KeepAllDetector detector;
  for (std::uint32_t seed = 1; seed <= 3; ++seed) expectSamePicks(detector, seed);
}

}  // namespace
}  // namespace holdback
