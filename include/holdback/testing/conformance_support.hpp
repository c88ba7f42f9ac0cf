// What the conformance suites (testing/usage_limit_policy_conformance.hpp,
// testing/saturation_detector_conformance.hpp) share, for hosts writing their own suites too:
//
//   Factory<Interface>   a labelled way to make a fresh instance (the suites' test parameter)
//   FactoryName          names a value-parameterized test after the factory's label
//   SeededGenerator      a fixed-seed random source: pick(n), uniform(lo, hi), oneOf(special)
//   runConcurrently      runs fn(thread_index) on n threads at once and joins them all
//
// Header-only, built on GoogleTest. Thread safety: SeededGenerator is thread-compatible (one per
// thread); the rest are stateless.
#pragma once

#include "holdback/abi.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

template <class Interface>
struct Factory {
  std::string label;
  std::function<std::unique_ptr<Interface>()> make;
};

struct FactoryName {
  template <class Param>
  std::string operator()(const ::testing::TestParamInfo<Param>& info) const {
    return info.param.label;
  }
};

class SeededGenerator {
 public:
  explicit SeededGenerator(std::uint32_t seed) : rng_(seed) {}

  // Uniform in [0, n).
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  // Uniform real in [lo, hi).
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  // Uniform integer in [lo, hi].
  template <class Int>
  Int between(Int lo, Int hi) {
    return std::uniform_int_distribution<Int>(lo, hi)(rng_);
  }
  // One element of a non-empty array.
  template <class T, std::size_t N>
  const T& oneOf(const T (&values)[N]) {
    return values[pick(N)];
  }

 private:
  std::mt19937 rng_;
};

// Starts `threads` threads, each running fn(index) with index in [0, threads), as close to
// simultaneously as thread creation allows, and joins them all.
template <class Fn>
void runConcurrently(int threads, Fn fn) {
  std::vector<std::thread> running;
  running.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) running.emplace_back([&fn, t] { fn(t); });
  for (std::thread& thread : running) thread.join();
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
