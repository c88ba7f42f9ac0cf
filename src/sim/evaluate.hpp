// The evaluation behind `holdback simulate --seeds`: every arm on every seed and detector, runs
// spread over threads, the unloaded baseline per class (cached per seed), the static-1.0 reference
// for goodput, and per metric the mean over seeds with its spread (min-max over seeds).
//
// Determinism: every run is a pure function of (scenario, detector, arm, seed); results are stored
// by index, so the evaluation (and its JSON) does not depend on the thread count.
//
// Thread safety: evaluate() is thread-compatible (it starts and joins its own threads).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/simulator.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// "1,2,5" or "1-5" (or a mix, "1-3,9"): at most kMaxSeeds seeds, no duplicates. On error returns
// nullopt and sets `error` to a message naming the value and what is allowed.
inline constexpr std::size_t kMaxSeeds = 1000;
[[nodiscard]] std::optional<std::vector<std::uint64_t>> parseSeeds(std::string_view text,
                                                                   std::string& error);

struct EvaluationOptions {
  std::vector<std::uint64_t> seeds{1};
  std::vector<DetectorKind> detectors{DetectorKind::kUtilization};
  std::vector<Arm> arms = allArms();
  unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
  // Keep the first seed's per-request and per-interval series (for --csv / --plot).
  bool collectSeries = false;
};

// A figure over seeds: mean, min and max (NaN when no seed has a value).
struct Spread {
  double mean = kNoValue;
  double min = kNoValue;
  double max = kNoValue;
};

struct WindowSummary {
  std::string window;
  Spread n;
  Spread ttftP50, ttftP95, ttftP99;
  Spread ttftP99OverUnloaded;  // p99 / the unloaded baseline's p99 (same class, window, seed)
  Spread queueP50, queueP95, queueP99;
  Spread donePerSec, outputTokensPerSec;
  Spread outputTokensPctOfStatic;  // outputTokensPerSec / static-1.0's on the same seed, in %
};

struct ClassSummary {
  std::string name;
  Priority priority = 0;
  std::vector<WindowSummary> windows;
  Spread rejected, evicted, unfinished;
  // In-flight eviction: revoked requests, output tokens destroyed, prefill tokens paid again,
  // and the wasted share of the class's generated output tokens in %.
  Spread revoked, wastedTokens, repaidPrefillTokens, wastedPct;
  std::vector<WindowSummary> unloaded;  // the baseline's windows (ttft and queue only meaningful)
};

struct ArmSummary {
  std::string name;
  std::vector<ClassSummary> classes;
  Spread holBlockedShare;
  Spread saturationMean, saturationP99, poolLoadMean, poolLoadP99, maxServerQueue;
  Spread dispatchesPerScrapeP50, dispatchesPerScrapeP99, dispatchesPerScrapeMax;
  Spread evictions, wastedTokens, repaidPrefillTokens;
  // Arms with eviction: revocations issued, and requests aborted per measured request of the top
  // (highest priority) class.
  bool eviction = false;
  Spread revocationsIssued, evictionsPerTopRequest;
};

struct DetectorReport {
  DetectorKind detector = DetectorKind::kUtilization;
  std::vector<ArmSummary> arms;
  std::vector<ArmResult> firstSeed;  // the first seed's runs, one per arm
};

struct Evaluation {
  Scenario scenario;  // with the first detector
  std::vector<std::uint64_t> seeds;
  std::vector<DetectorReport> reports;  // one per detector
  std::size_t runs = 0;                 // simulations run (arms, baselines and references)
  std::size_t truncatedRuns = 0;        // runs stopped at RunOptions::maxRequests
};

[[nodiscard]] Evaluation evaluate(const Scenario& scenario, const EvaluationOptions& options);

// One JSON document (the schema is in docs/simulation.md; key names are stable).
[[nodiscard]] std::string formatJson(const Evaluation& evaluation);
// The summary table over seeds: per arm the top class's TTFT p99 (burst, onset, idle or all) and
// its ratio to the unloaded baseline, the lowest class's goodput and its share of static-1.0, and
// the signal health; "mean (min-max)".
[[nodiscard]] std::string formatSummary(const Evaluation& evaluation);
// pareto.csv: per detector and arm the top class's TTFT p99 (burst, onset) and the lowest class's
// goodput (output tokens/s over the whole measured time), each mean,min,max.
[[nodiscard]] std::string paretoCsv(const Evaluation& evaluation);
// A gnuplot script rendering pareto-<scenario>-<detector>.png from pareto.csv.
[[nodiscard]] std::string paretoGnuplot(const Evaluation& evaluation);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
