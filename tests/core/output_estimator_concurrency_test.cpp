// OutputEstimator under concurrent recorders and readers; run under ThreadSanitizer by
// scripts/test.sh.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "holdback/core/output_estimator.hpp"

namespace holdback {
namespace {

TEST(OutputEstimatorConcurrencyTest, RecordersAndReadersAgree) {
  auto created = OutputEstimator::create();
  ASSERT_TRUE(created.ok());
  OutputEstimator& e = *created.value();
  constexpr int kThreads = 4;
  constexpr int kEach = 5000;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!done.load()) {
      for (std::int64_t key = 0; key < 8; ++key) {
        const double v = e.estimate(key);
        if (!(v >= 1.0 && v <= 1000.0)) bad.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    // Every thread records into the same 8 keys, so new keys are added concurrently too.
    writers.emplace_back([&e, t] {
      for (int i = 0; i < kEach; ++i) e.record((i + t) % 8, 100.0 + (i % 10) * 10.0);
    });
  }
  for (auto& w : writers) w.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  std::uint64_t total = 0;
  for (std::int64_t key = 0; key < 8; ++key) {
    total += e.samples(key);
    // 100..190 in steps of 10: the p90 is near 190.
    EXPECT_NEAR(e.estimate(key), 185.0, 15.0) << key;
  }
  EXPECT_EQ(total, std::uint64_t{kThreads} * kEach);  // no sample lost, no key duplicated
}

}  // namespace
}  // namespace holdback
