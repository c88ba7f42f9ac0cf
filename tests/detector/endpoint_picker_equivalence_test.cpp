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

#include "eager_pick_reference.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
namespace {

using test_support::EagerPickerReference;

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
      // Some endpoints too small for the longer requests (rule 2), some of unknown capacity.
      e.kvCapacityTokens = rng() % 4 == 0 ? 1024 : rng() % 9 == 0 ? 0 : 4096;
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
