// The Go reference's utilization-detector saturation vectors (upstream-reference.md §4.2, from
// the upstream detector tests): queueDepthThreshold 5, kvCacheUtilThreshold 0.9,
// metricsStalenessThreshold 100 ms, Go's arithmetic (no cap on an endpoint's score, reference
// telemetry validation). Shared by the detector's own test and the reference profile's.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "holdback/core/endpoint.hpp"

namespace holdback::test_support {

struct GoSaturationVector {
  const char* label;
  std::vector<Endpoint> endpoints;
  double expected;
};

// An endpoint with metrics taken `age` before `now`.
inline Endpoint goVectorEndpoint(TimePoint now, double queue, double kv,
                                 Duration age = Duration::zero()) {
  Endpoint e;
  e.name = "e";
  e.waitingQueueSize = queue;
  e.kvCacheUsage = kv;
  e.updateTime = now - age;
  return e;
}

inline std::vector<GoSaturationVector> goUtilizationSaturationVectors(TimePoint now) {
  using std::chrono::milliseconds;
  const auto m = [now](double queue, double kv, Duration age = Duration::zero()) {
    return goVectorEndpoint(now, queue, kv, age);
  };
  Endpoint no_metrics;
  no_metrics.name = "nil";
  return {
      {"none", {}, 1.0},
      {"fresh", {m(2, 0.5)}, 0.5 / 0.9},
      {"stale", {m(1, 0.1, milliseconds(200))}, 1.0},
      {"queue overload", {m(10, 0.1)}, 2.0},
      {"kv overload", {m(1, 0.95)}, 0.95 / 0.90},
      {"nil metrics", {no_metrics}, 1.0},
      {"two fresh", {m(1, 0.1), m(0, 0.2)}, (0.2 + 0.2 / 0.9) / 2},
      {"fresh + stale", {m(1, 0.1), m(0, 0.2, milliseconds(300))}, 0.6},
      {"fresh + overloaded", {m(1, 0.1), m(15, 0.2)}, 1.6},
      {"three mixed",
       {m(1, 0.1, milliseconds(200)), m(20, 0.2), m(1, 0.99)},
       (1.0 + 4.0 + 1.1) / 3},
      {"exactly at threshold", {m(5, 0.1)}, 1.0},
      {"just past staleness", {m(1, 0.1, milliseconds(101))}, 1.0},
  };
}

}  // namespace holdback::test_support
