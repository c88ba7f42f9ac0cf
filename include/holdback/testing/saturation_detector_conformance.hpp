// A value-parameterized GoogleTest suite that every SaturationDetector must pass: the built-in
// ones and a host's own. Include this header in one test file and instantiate it:
//
//   INSTANTIATE_TEST_SUITE_P(MyDetectors, SaturationDetectorConformanceTest,
//       ::testing::Values(holdback::testing::DetectorFactory{"mine", [] { return makeMine(); }}),
//       holdback::testing::DetectorFactoryName{});
//
// Checked on many random pools from a fixed seed, including the nasty inputs (NaN, infinite,
// negative and huge telemetry and weights, INT64_MIN/INT64_MAX in-flight counts, missing
// metrics, timestamps at the ends of the clock's range, every role):
//   - saturation() is finite and >= 0, and an empty pool reads 1.0;
//   - saturation() and filter() are deterministic (a pure function of the span and `now`);
//   - filter() writes strictly increasing indices into the pool, no more than the buffer holds
//     and nothing beyond what it reports; when it reports failOpen it wrote 0, 1, 2, ... (the
//     original list); an empty pool keeps nothing and does not fail open;
//   - both are safe to call from several threads at once;
//   - a detector whose filtersEachEndpointAlone() is true keeps each endpoint alone exactly when
//     it keeps it in the pool (and keeps none alone when the pool's filter keeps none).
#pragma once

#include "holdback/abi.hpp"
#include "holdback/testing/conformance_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

// The suite's parameter and its name (testing/conformance_support.hpp).
using DetectorFactory = Factory<SaturationDetector>;

using DetectorFactoryName = FactoryName;

// Random pools and times, including the edge cases, from a fixed seed.
class EndpointGenerator : public SeededGenerator {
 public:
  using SeededGenerator::SeededGenerator;

  // Around the reference time, sometimes at the ends of the clock's range.
  TimePoint now() {
    if (pick(20) == 0) return pick(2) == 0 ? TimePoint::min() : TimePoint::max();
    return reference() + std::chrono::milliseconds(pick(100));
  }

  std::vector<Endpoint> pool() {
    const std::size_t n = pick(8) == 0 ? 0 : 1 + pick(12);
    std::vector<Endpoint> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      Endpoint& e = out[i];
      e.name = "endpoint-" + std::to_string(i);
      e.waitingQueueSize = telemetry(20.0);
      e.kvCacheUsage = telemetry(1.2);
      e.runningRequests = telemetry(300.0);
      e.weight = telemetry(8.0);
      e.inFlightRequests = count(300);
      e.inFlightTokens = count(2'000'000);
      e.role = static_cast<EndpointRole>(pick(7));
      switch (pick(6)) {
        case 0:
          e.updateTime.reset();  // no metrics
          break;
        case 1:  // anywhere in the clock's range
          e.updateTime = TimePoint(Duration(between<std::int64_t>(
              std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())));
          break;
        default:  // from 10 s in the future to 10 s in the past
          e.updateTime = reference() + std::chrono::milliseconds(between<int>(-10'000, 10'000));
      }
    }
    return out;
  }

 private:
  static TimePoint reference() { return TimePoint{} + std::chrono::hours(24 * 365); }

  double telemetry(double typical) {
    static constexpr double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(),
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          -1.0,
                                          -0.0,
                                          0.0,
                                          1e300,
                                          std::numeric_limits<double>::max(),
                                          std::numeric_limits<double>::denorm_min()};
    if (pick(5) == 0) return kSpecial[pick(std::size(kSpecial))];
    return uniform(0.0, typical);
  }

  std::int64_t count(std::int64_t typical) {
    static constexpr std::int64_t kSpecial[] = {std::numeric_limits<std::int64_t>::min(),
                                                std::numeric_limits<std::int64_t>::max(), -1, 0};
    if (pick(6) == 0) return kSpecial[pick(std::size(kSpecial))];
    return between<std::int64_t>(0, typical);
  }
};

class SaturationDetectorConformanceTest : public ::testing::TestWithParam<DetectorFactory> {
 protected:
  std::unique_ptr<SaturationDetector> make() const {
    auto detector = GetParam().make();
    EXPECT_NE(detector, nullptr);
    return detector;
  }

  // Checks one filter result; returns false (after recording failures) when it is invalid.
  static bool checkFilter(const std::vector<Endpoint>& pool, const std::vector<std::size_t>& out,
                          const FilterResult& r, std::size_t written_limit,
                          const std::string& context) {
    constexpr std::size_t kSentinel = std::numeric_limits<std::size_t>::max();
    bool ok = true;
    const auto fail = [&](const std::string& what) {
      ADD_FAILURE() << context << ": " << what;
      ok = false;
    };
    if (r.kept > written_limit) fail("kept " + std::to_string(r.kept) + " > buffer");
    if (r.kept > pool.size()) fail("kept more than the pool");
    for (std::size_t i = 0; i < r.kept && i < out.size(); ++i) {
      if (out[i] >= pool.size()) fail("index out of range");
      if (i > 0 && out[i] <= out[i - 1]) fail("indices not strictly increasing");
      if (r.failOpen && out[i] != i) fail("fail-open did not return the original list");
    }
    for (std::size_t i = r.kept; i < out.size(); ++i) {
      if (out[i] != kSentinel) fail("wrote beyond `kept`");
    }
    if (r.failOpen && r.kept != std::min(pool.size(), written_limit)) {
      fail("fail-open returned part of the list");
    }
    if (pool.empty() && (r.kept != 0 || r.failOpen)) fail("empty pool kept something");
    return ok;
  }
};

TEST_P(SaturationDetectorConformanceTest, SaturationIsFiniteAndNonNegative) {
  auto detector = make();
  EndpointGenerator gen(20261130);
  for (int round = 0; round < 3000; ++round) {
    const auto pool = gen.pool();
    const TimePoint now = gen.now();
    const double s = detector->saturation(pool, now);
    ASSERT_TRUE(std::isfinite(s)) << "round " << round << ": " << s;
    ASSERT_GE(s, 0.0) << "round " << round;
    ASSERT_FALSE(std::signbit(s)) << "round " << round << ": -0.0";
    ASSERT_EQ(detector->saturation(pool, now), s) << "round " << round << ": not deterministic";
  }
}

TEST_P(SaturationDetectorConformanceTest, EmptyPoolReadsOne) {
  auto detector = make();
  EXPECT_EQ(detector->saturation({}, TimePoint{}), 1.0);
  EXPECT_EQ(detector->saturation({}, TimePoint::max()), 1.0);
}

TEST_P(SaturationDetectorConformanceTest, FilterReturnsAnOrderedSubsetOrTheOriginalList) {
  auto detector = make();
  EndpointGenerator gen(4242);
  constexpr std::size_t kSentinel = std::numeric_limits<std::size_t>::max();
  for (int round = 0; round < 3000; ++round) {
    const auto pool = gen.pool();
    const TimePoint now = gen.now();
    // A buffer of the pool's size, plus spare room that must stay untouched.
    std::vector<std::size_t> out(pool.size() + 2, kSentinel);
    const FilterResult r = detector->filter(pool, now, out);
    const std::string context = "round " + std::to_string(round);
    ASSERT_TRUE(checkFilter(pool, out, r, out.size(), context));
    // Deterministic.
    std::vector<std::size_t> again(pool.size() + 2, kSentinel);
    const FilterResult r2 = detector->filter(pool, now, again);
    ASSERT_EQ(r2.kept, r.kept) << context;
    ASSERT_EQ(r2.failOpen, r.failOpen) << context;
    ASSERT_EQ(again, out) << context;
    // A shorter buffer gets a prefix of the same answer.
    if (!pool.empty()) {
      const std::size_t room = gen.pick(pool.size());
      std::vector<std::size_t> buffer(pool.size(), kSentinel);
      const FilterResult s = detector->filter(pool, now, std::span(buffer).first(room));
      ASSERT_TRUE(checkFilter(pool, buffer, s, room, context + " short buffer"));
      ASSERT_EQ(s.failOpen, r.failOpen) << context;
      ASSERT_EQ(s.kept, std::min(room, r.kept)) << context;
      for (std::size_t i = 0; i < s.kept; ++i) ASSERT_EQ(buffer[i], out[i]) << context;
    }
  }
}

TEST_P(SaturationDetectorConformanceTest, FilterOfEachEndpointAloneAgreesWithThePool) {
  auto detector = make();
  if (!detector->filtersEachEndpointAlone()) return;  // the pool is filtered in one call
  EndpointGenerator gen(20261203);
  for (int round = 0; round < 1000; ++round) {
    const auto pool = gen.pool();
    const TimePoint now = gen.now();
    std::vector<std::size_t> out(pool.size());
    const FilterResult r = detector->filter(pool, now, out);
    std::vector<std::size_t> expected;
    if (!r.failOpen)
      expected.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(r.kept));
    std::vector<std::size_t> alone;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      std::size_t index = 0;
      const FilterResult one =
          detector->filter(std::span(pool).subspan(i, 1), now, std::span(&index, 1));
      if (one.kept == 1 && !one.failOpen) alone.push_back(i);
    }
    ASSERT_EQ(alone, expected) << "round " << round;
  }
}

TEST_P(SaturationDetectorConformanceTest, ReportsTypeAndName) {
  auto detector = make();
  EXPECT_FALSE(detector->type().empty());
  EXPECT_FALSE(detector->name().empty());
}

TEST_P(SaturationDetectorConformanceTest, ConcurrentCallsStayValid) {
  auto detector = make();
  constexpr int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  runConcurrently(kThreads, [&](int t) {
    EndpointGenerator gen(static_cast<std::uint32_t>(100 + t));
    for (int round = 0; round < 300; ++round) {
      const auto pool = gen.pool();
      const TimePoint now = gen.now();
      const double s = detector->saturation(pool, now);
      std::vector<std::size_t> out(pool.size());
      const FilterResult r = detector->filter(pool, now, out);
      const bool ok = std::isfinite(s) && s >= 0.0 && r.kept <= pool.size();
      failures[static_cast<std::size_t>(t)] += ok ? 0 : 1;
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], 0) << t;
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
