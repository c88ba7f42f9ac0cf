// Upstream's eviction benchmark shapes (llm-d-router PR #2107: the eviction
// simulator of pkg/epp/flowcontrol/benchmark, https://github.com/llm-d/llm-d-router)
// against holdback's FlowController and its in-flight eviction (flow/eviction.hpp): a
// deterministic, millisecond-stepped closed loop, run by `holdback eviction-bench` and asserted
// by tests/sim/eviction_bench_test.cpp. docs/guide/eviction.md has the table.
//
// The model
//   A synthetic pool of C = 20 units, preloaded with S = 20 sheddable leases (priority -1, one unit
//   each, dispatched through the controller, never ending unless churn is on). High-priority work
//   (priority 100) arrives at t = 0: `single` (1 request), `batch32` (32 at once, sticky: they hold
//   their unit to the end), `sustained` (300 over 3 s, one every 10 ms, 250 ms service). Every
//   band's ceiling is h = 0.9 (static policy), so high-priority work is admitted while
//   occupancy / C < 0.9.
//   Each millisecond: terminations due now free their unit and the host confirms them (release),
//   completions and churn end their leases, then dispatch cycles run until one does not
//   dispatch (each dispatch occupies a unit at once). The controller's evict callback schedules
//   the victim's termination `terminationLatency` later (3 ms).
//   The sensor: occupancy / C where a dispatch counts at once (the gateway's own ledger) and a
//   freed unit only `visibilityLag` after it was freed: 0 for `in-flight` (the concurrency
//   detector), 200 ms for `lagging` (scraped telemetry).
//   Churn (baselines): sheddable leases end after an exponential holding time (mean 500 ms) and
//   their client re-enqueues one (closed loop); deterministic per seed.
//
// Figures per run: time to first relief (first high-priority dispatch), time to last admission,
// high-priority wait p50/p95, revocations issued and confirmed, the analytic minimum (upstream's
// minEvictionsRequired) and over-eviction against it (single and batch32), goodput (high-priority
// admissions per second until the last admission; sustained: completions per second of the run).
//
// Thread safety: pure functions (each run owns its controller).
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

enum class BurstShape { kSingle, kBatch32, kSustained };
enum class SensorProfile { kInFlight, kLagging };
[[nodiscard]] std::string_view toString(BurstShape shape) noexcept;
[[nodiscard]] std::string_view toString(SensorProfile sensor) noexcept;

struct EvictionBenchCase {
  BurstShape shape = BurstShape::kSingle;
  SensorProfile sensor = SensorProfile::kInFlight;
  Duration grace = std::chrono::milliseconds(50);
  std::size_t cap = 2;
  bool eviction = true;
  // Natural churn of the sheddable leases (0 = none).
  Duration churnMean{0};
  // Wait-vs-evict (holdback's improvement) with this tolerance; 0 = off.
  Duration waitTolerance{0};
  // Heterogeneous sheddable leases: footprints of 1, 2 or 3 units (the pool still holds 20 units)
  // generating 20-100 tokens/s each, reported with Ticket::updateLease every 10 ms; footprintAware
  // switches holdback's footprint-aware victims on.
  bool heterogeneous = false;
  bool footprintAware = false;
  std::uint64_t seed = 1;

  // Pool and timing (upstream's values).
  std::size_t capacity = 20;
  std::size_t sheddable = 20;
  double ceiling = 0.9;
  Duration terminationLatency = std::chrono::milliseconds(3);
  Duration lag() const noexcept {
    return sensor == SensorProfile::kLagging ? std::chrono::milliseconds(200) : Duration{0};
  }
  Duration horizon = std::chrono::seconds(20);
};

struct EvictionBenchResult {
  std::size_t highRequests = 0;
  std::size_t admitted = 0;
  std::optional<double> firstReliefMs;
  std::optional<double> lastAdmissionMs;
  // Nearest rank (the simulator's rule); NaN without admissions.
  double waitP50Ms = 0.0;
  double waitP95Ms = 0.0;
  std::uint64_t revocations = 0;
  std::uint64_t confirmed = 0;
  std::uint64_t decisions = 0;   // dispatch cycles that revoked
  std::uint64_t deferred = 0;    // wait-vs-evict holds
  std::uint64_t churned = 0;     // sheddable leases that ended on their own
  std::uint64_t tokensLost = 0;  // tokens the revoked leases had generated (heterogeneous)
  // Analytic minimum (single, batch32) and the excess over it.
  std::optional<std::size_t> minEvictions;
  std::optional<std::size_t> minAdmits;
  std::optional<long long> overEviction;
  double goodput = 0.0;  // see the file comment
};

// upstream's minEvictionsRequired(S, K, C, h): the fewest revocations that admit
// min(K, maxBelow + 1) high-priority requests, maxBelow = ceil(h * C) - 1.
struct MinEvictions {
  std::size_t evictions = 0;
  std::size_t admits = 0;
};
[[nodiscard]] MinEvictions minEvictionsRequired(std::size_t sheddable, std::size_t burst,
                                                std::size_t capacity, double ceiling) noexcept;

[[nodiscard]] EvictionBenchResult runEvictionBench(const EvictionBenchCase& c);

// The documented matrix: shapes x sensors x graces {5, 50, 200, 500} ms (cap 2), the baselines
// (eviction off, without and with 500 ms churn), wait-vs-evict under churn, caps 1 and 5 at the
// matched grace, and heterogeneous footprints with and without footprint-aware victims.
[[nodiscard]] std::vector<EvictionBenchCase> evictionBenchMatrix();

// A Markdown table, one row per case.
[[nodiscard]] std::string formatEvictionBenchTable(const std::vector<EvictionBenchCase>& cases,
                                                   const std::vector<EvictionBenchResult>& results);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
