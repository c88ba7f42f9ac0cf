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
#include <utility>
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
  // Requests refused as larger than every endpoint's KV capacity (ClassResult::tooLarge).
  Spread tooLarge;
  // Priority preemption on the servers (ClassResult::preemptions): preemptions, tokens prefilled
  // again, and those tokens as % of the class's generated output tokens (wastedPct's base).
  Spread preemptions, recomputedTokens, recomputedPct;
  // The minute windows (ClassResult::minutes) by index over seeds, and the worst minute: per seed
  // the minute with the highest TTFT p99 (worstMinute()), its figures over seeds (its unloaded
  // ratio against the same minute alone on the pool, its % of static-1.0 against static-1.0's same
  // minute) and its index per seed (NaN when no minute had a TTFT).
  std::vector<WindowSummary> minutes, minutesUnloaded;
  WindowSummary worstMinute, worstMinuteUnloaded;
  std::vector<double> worstMinuteIndex;
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
  // The servers' scheduling in this arm's runs (engineSchedulingOf), and with priority
  // preemption the preemptions, the tokens recomputed and the preemptions per measured request of
  // the top class.
  EngineScheduling engineScheduling = EngineScheduling::kFcfs;
  Spread preemptions, recomputedTokens, preemptionsPerTopRequest;
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
  // Empty for the simulator; "replay" for runs measured on real processes (holdback-replay):
  // formatJson then adds "mode": "replay".
  std::string mode;
};

[[nodiscard]] Evaluation evaluate(const Scenario& scenario, const EvaluationOptions& options);

// The aggregation behind evaluate(), for runs made elsewhere (holdback-replay): `arms` indexed
// [(detector x seeds + seed) x arms + arm], `baselines` [(detector x seeds + seed) x classes +
// class] (the class alone on the pool), `references` [detector x seeds + seed] (static-1.0; read
// only when options.arms has no static-1.0). The first seed's arm results are moved out of `arms`
// into DetectorReport::firstSeed. Evaluation::runs is left 0.
[[nodiscard]] Evaluation summarizeRuns(const Scenario& scenario, const EvaluationOptions& options,
                                       std::vector<ArmResult>& arms,
                                       const std::vector<ArmResult>& baselines,
                                       const std::vector<ArmResult>& references);

// One JSON document (the schema is in docs/simulation.md; key names are stable).
[[nodiscard]] std::string formatJson(const Evaluation& evaluation);
// The summary table over seeds: per arm the top class's TTFT p99 (burst, onset, idle or all) and
// its ratio to the unloaded baseline, the lowest class's goodput and its share of static-1.0, and
// the signal health; "mean (min-max)".
[[nodiscard]] std::string formatSummary(const Evaluation& evaluation);
// The compact summary `holdback simulate` prints by default, per detector: the recommended arm
// (kRecommendedArm) against none, static-1.0 and the best other arm (bestOtherArm()), the top
// class's TTFT p99 as a multiple of its unloaded p99 per window, the lowest class's goodput as % of
// static-1.0 and the requests evicted; then where the full tables and pictures are. Over several
// seeds, each arm's row of means is followed by a row of min-max.
[[nodiscard]] std::string formatOverview(const Evaluation& evaluation);
// The rule bestOtherArm() applies, in one line (printed under the summary, quoted in the docs).
inline constexpr std::string_view kBestOtherArmRule =
    "best other: of the other arms keeping >= 90 % of static-1.0's idle goodput, the lowest burst "
    "p99";
// The index in report.arms of the best other arm, by the rule above: lowest mean burst (or all,
// without windows) TTFT p99 / unloaded of the top class among the arms whose lowest class keeps
// >= 90 % of static-1.0's goodput in idle windows (all, without windows); ties go to the higher
// whole-run goodput, then to the earlier arm; when no arm qualifies, the highest whole-run goodput.
// nullopt when the report has no arm other than those three.
[[nodiscard]] std::optional<std::size_t> bestOtherArm(const DetectorReport& report,
                                                      std::string_view recommended);
// The top (highest priority) and bottom class indices of an arm's classes (first on ties).
[[nodiscard]] std::pair<std::size_t, std::size_t> topAndBottomClass(
    const std::vector<ClassSummary>& classes);
// The window named `name` of a class, or null.
[[nodiscard]] const WindowSummary* findWindow(const ClassSummary& c, std::string_view name);
// "mean" or, with `spread`, "mean (min-max)", `decimals` decimals; "-" for no value.
[[nodiscard]] std::string formatSpread(const Spread& s, int decimals, bool spread);
// pareto.csv: per detector and arm the top class's TTFT p99 (burst, onset) and the lowest class's
// goodput (output tokens/s over the whole measured time), each mean,min,max.
[[nodiscard]] std::string paretoCsv(const Evaluation& evaluation);
// A gnuplot script rendering pareto-<scenario>-<detector>.png from pareto.csv.
[[nodiscard]] std::string paretoGnuplot(const Evaluation& evaluation);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
