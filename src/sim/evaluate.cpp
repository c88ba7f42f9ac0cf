// The evaluation over seeds (src/sim/evaluate.hpp): seeds, jobs, threads, baselines
// and the aggregation into means and spreads. Its reports are in evaluation_report.cpp,
// overview_report.cpp and pareto_report.cpp.
#include "sim/evaluate.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace {

std::optional<std::uint64_t> parseUnsigned(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::uint64_t v = 0;
  for (const char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  return v;
}

Spread spreadOf(const std::vector<double>& values) {
  Spread out;
  double sum = 0.0;
  std::size_t n = 0;
  for (const double v : values) {
    if (std::isnan(v)) continue;
    sum += v;
    out.min = n == 0 ? v : std::min(out.min, v);
    out.max = n == 0 ? v : std::max(out.max, v);
    ++n;
  }
  if (n > 0) out.mean = sum / static_cast<double>(n);
  return out;
}

// Collects one figure per seed, then reduces it to a Spread.
template <class F>
Spread over(std::size_t seeds, F&& value) {
  std::vector<double> v;
  v.reserve(seeds);
  for (std::size_t s = 0; s < seeds; ++s) v.push_back(value(s));
  return spreadOf(v);
}

const WindowStats* windowOf(const ClassResult& c, std::string_view name) {
  for (const WindowStats& w : c.windows) {
    if (w.window == name) return &w;
  }
  return nullptr;
}

double ratio(double a, double b) {
  return b > 0.0 && !std::isnan(a) ? a / b : kNoValue;
}

void runAll(std::vector<std::function<void()>>& jobs, unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(jobs.size()));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < jobs.size(); i = next++) jobs[i]();
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::optional<std::vector<std::uint64_t>> parseSeeds(std::string_view text, std::string& error) {
  std::vector<std::uint64_t> seeds;
  const std::string shown = "\"" + std::string(text) + "\"";
  if (text.empty()) {
    error = "--seeds needs a list (1,2,3) or a range (1-5) of seeds";
    return std::nullopt;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const auto a = parseUnsigned(item.substr(0, dash));
    const auto b = dash == std::string_view::npos ? a : parseUnsigned(item.substr(dash + 1));
    if (!a || !b) {
      error = "--seeds " + shown + ": \"" + std::string(item) +
              "\" is not a seed (a non-negative integer) or a range A-B";
      return std::nullopt;
    }
    if (*b < *a) {
      error = "--seeds " + shown + ": the range \"" + std::string(item) + "\" is empty (" +
              std::to_string(*b) + " < " + std::to_string(*a) + ")";
      return std::nullopt;
    }
    if (*b - *a >= kMaxSeeds || seeds.size() + (*b - *a + 1) > kMaxSeeds) {
      error = "--seeds " + shown + ": more than " + std::to_string(kMaxSeeds) + " seeds";
      return std::nullopt;
    }
    for (std::uint64_t s = *a; s <= *b; ++s) {
      if (std::find(seeds.begin(), seeds.end(), s) != seeds.end()) {
        error = "--seeds " + shown + ": seed " + std::to_string(s) + " is given twice";
        return std::nullopt;
      }
      seeds.push_back(s);
    }
    start = comma + 1;
  }
  return seeds;
}

Evaluation evaluate(const Scenario& scenario, const EvaluationOptions& options) {
  const std::size_t nd = options.detectors.size();
  const std::size_t ns = options.seeds.size();
  const std::size_t na = options.arms.size();
  const std::size_t nc = scenario.classes.size();
  Arm none;
  Arm reference;
  (void)findArm("none", none);
  (void)findArm("static-1.0", reference);
  std::size_t referenceIndex = na;
  for (std::size_t a = 0; a < na; ++a) {
    if (options.arms[a].name == reference.name) referenceIndex = a;
  }

  // Scenarios per (detector, seed); results by index.
  std::vector<Scenario> scenarios(nd * ns, scenario);
  std::vector<ArmResult> arms(nd * ns * na), baselines(nd * ns * nc), references(nd * ns);
  std::vector<std::function<void()>> jobs;
  for (std::size_t d = 0; d < nd; ++d) {
    for (std::size_t s = 0; s < ns; ++s) {
      Scenario& sc = scenarios[d * ns + s];
      sc.detector = options.detectors[d];
      sc.seed = options.seeds[s];
      for (std::size_t a = 0; a < na; ++a) {
        const RunOptions ro{.collectSeries = options.collectSeries && s == 0};
        jobs.emplace_back([&, d, s, a, ro] {
          arms[(d * ns + s) * na + a] = runArm(scenarios[d * ns + s], options.arms[a], ro);
        });
      }
      for (std::size_t c = 0; c < nc; ++c) {
        jobs.emplace_back([&, d, s, c] {
          baselines[(d * ns + s) * nc + c] =
              runArm(scenarios[d * ns + s], none, RunOptions{.onlyClass = static_cast<int>(c)});
        });
      }
      if (referenceIndex == na) {
        jobs.emplace_back(
            [&, d, s] { references[d * ns + s] = runArm(scenarios[d * ns + s], reference); });
      }
    }
  }
  runAll(jobs, options.threads);
  Evaluation out = summarizeRuns(scenario, options, arms, baselines, references);
  out.runs = jobs.size();
  return out;
}

Evaluation summarizeRuns(const Scenario& scenario, const EvaluationOptions& options,
                         std::vector<ArmResult>& arms, const std::vector<ArmResult>& baselines,
                         const std::vector<ArmResult>& references) {
  Evaluation out;
  out.scenario = scenario;
  if (!options.detectors.empty()) out.scenario.detector = options.detectors.front();
  out.seeds = options.seeds;
  const std::size_t nd = options.detectors.size();
  const std::size_t ns = options.seeds.size();
  const std::size_t na = options.arms.size();
  const std::size_t nc = scenario.classes.size();
  std::size_t referenceIndex = na;
  for (std::size_t a = 0; a < na; ++a) {
    if (options.arms[a].name == "static-1.0") referenceIndex = a;
  }
  for (const std::vector<ArmResult>* results :
       {static_cast<const std::vector<ArmResult>*>(&arms), &baselines, &references}) {
    for (const ArmResult& r : *results) out.truncatedRuns += r.truncated ? 1 : 0;
  }

  for (std::size_t d = 0; d < nd; ++d) {
    DetectorReport report;
    report.detector = options.detectors[d];
    auto arm = [&](std::size_t s, std::size_t a) -> const ArmResult& {
      return arms[(d * ns + s) * na + a];
    };
    auto baseline = [&](std::size_t s, std::size_t c) -> const ClassResult& {
      return baselines[(d * ns + s) * nc + c].classes[c];
    };
    auto ref = [&](std::size_t s) -> const ArmResult& {
      return referenceIndex < na ? arm(s, referenceIndex) : references[d * ns + s];
    };
    for (std::size_t a = 0; a < na; ++a) {
      ArmSummary sum;
      sum.name = options.arms[a].name;
      for (std::size_t c = 0; c < nc; ++c) {
        ClassSummary cs;
        const ClassResult& first = arm(0, a).classes[c];
        cs.name = first.name;
        cs.priority = first.priority;
        auto cls = [&](std::size_t s) -> const ClassResult& { return arm(s, a).classes[c]; };
        cs.rejected = over(ns, [&](std::size_t s) { return double(cls(s).rejected); });
        cs.evicted = over(ns, [&](std::size_t s) { return double(cls(s).evicted); });
        cs.unfinished = over(ns, [&](std::size_t s) { return double(cls(s).unfinished); });
        cs.tooLarge = over(ns, [&](std::size_t s) { return double(cls(s).tooLarge); });
        cs.revoked = over(ns, [&](std::size_t s) { return double(cls(s).revoked); });
        cs.wastedTokens = over(ns, [&](std::size_t s) { return double(cls(s).wastedTokens); });
        cs.repaidPrefillTokens =
            over(ns, [&](std::size_t s) { return double(cls(s).repaidPrefillTokens); });
        cs.wastedPct = over(ns, [&](std::size_t s) {
          return 100.0 * ratio(double(cls(s).wastedTokens), double(cls(s).generatedTokens));
        });
        cs.preemptions = over(ns, [&](std::size_t s) { return double(cls(s).preemptions); });
        cs.recomputedTokens =
            over(ns, [&](std::size_t s) { return double(cls(s).recomputedTokens); });
        cs.recomputedPct = over(ns, [&](std::size_t s) {
          return 100.0 * ratio(double(cls(s).recomputedTokens), double(cls(s).generatedTokens));
        });
        // One window's summary over seeds; each getter gives seed s's window or null.
        using Getter = std::function<const WindowStats*(std::size_t)>;
        auto summarize = [&](const std::string& name, const Getter& win, const Getter& base,
                             const Getter& refWin, WindowSummary& ws, WindowSummary& us) {
          auto of = [&](const Getter& g, auto field) {
            return over(ns, [&](std::size_t s) {
              const WindowStats* w = g(s);
              return w == nullptr ? kNoValue : field(*w);
            });
          };
          ws.window = name;
          ws.n = of(win, [](const WindowStats& w) { return double(w.arrived); });
          ws.ttftP50 = of(win, [](const WindowStats& w) { return w.ttftMs.p50; });
          ws.ttftP95 = of(win, [](const WindowStats& w) { return w.ttftMs.p95; });
          ws.ttftP99 = of(win, [](const WindowStats& w) { return w.ttftMs.p99; });
          ws.ttftP99OverUnloaded = over(ns, [&](std::size_t s) {
            const WindowStats* w = win(s);
            const WindowStats* b = base(s);
            return w == nullptr || b == nullptr ? kNoValue : ratio(w->ttftMs.p99, b->ttftMs.p99);
          });
          ws.queueP50 = of(win, [](const WindowStats& w) { return w.queueMs.p50; });
          ws.queueP95 = of(win, [](const WindowStats& w) { return w.queueMs.p95; });
          ws.queueP99 = of(win, [](const WindowStats& w) { return w.queueMs.p99; });
          ws.donePerSec = of(win, [](const WindowStats& w) { return w.completedPerSecond; });
          ws.outputTokensPerSec =
              of(win, [](const WindowStats& w) { return w.outputTokensPerSecond; });
          ws.outputTokensPctOfStatic = over(ns, [&](std::size_t s) {
            const WindowStats* w = win(s);
            const WindowStats* r = refWin(s);
            return w == nullptr || r == nullptr
                       ? kNoValue
                       : 100.0 * ratio(w->outputTokensPerSecond, r->outputTokensPerSecond);
          });
          us.window = name;
          us.n = of(base, [](const WindowStats& w) { return double(w.arrived); });
          us.ttftP50 = of(base, [](const WindowStats& w) { return w.ttftMs.p50; });
          us.ttftP95 = of(base, [](const WindowStats& w) { return w.ttftMs.p95; });
          us.ttftP99 = of(base, [](const WindowStats& w) { return w.ttftMs.p99; });
        };
        for (const WindowStats& w0 : first.windows) {
          const std::string& name = w0.window;
          WindowSummary ws;
          WindowSummary us;
          summarize(
              name, [&](std::size_t s) { return windowOf(cls(s), name); },
              [&](std::size_t s) { return windowOf(baseline(s, c), name); },
              [&](std::size_t s) { return windowOf(ref(s).classes[c], name); }, ws, us);
          cs.windows.push_back(std::move(ws));
          cs.unloaded.push_back(std::move(us));
        }
        // The minutes (by index), and per seed the minute with the highest TTFT p99.
        auto minuteOf = [](const ClassResult& r, std::size_t m) -> const WindowStats* {
          return m < r.minutes.size() ? &r.minutes[m] : nullptr;
        };
        auto refClass = [&](std::size_t s) -> const ClassResult* {
          return c < ref(s).classes.size() ? &ref(s).classes[c] : nullptr;
        };
        for (std::size_t m = 0; m < first.minutes.size(); ++m) {
          WindowSummary ws;
          WindowSummary us;
          summarize(
              first.minutes[m].window, [&](std::size_t s) { return minuteOf(cls(s), m); },
              [&](std::size_t s) { return minuteOf(baseline(s, c), m); },
              [&](std::size_t s) {
                return refClass(s) == nullptr ? nullptr : minuteOf(*refClass(s), m);
              },
              ws, us);
          cs.minutes.push_back(std::move(ws));
          cs.minutesUnloaded.push_back(std::move(us));
        }
        std::vector<std::size_t> worst(ns, first.minutes.size());
        for (std::size_t s = 0; s < ns; ++s) {
          worst[s] = worstMinute(cls(s)).value_or(cls(s).minutes.size());
          cs.worstMinuteIndex.push_back(
              worst[s] < cls(s).minutes.size() ? static_cast<double>(worst[s]) : kNoValue);
        }
        summarize(
            "worstMinute", [&](std::size_t s) { return minuteOf(cls(s), worst[s]); },
            [&](std::size_t s) { return minuteOf(baseline(s, c), worst[s]); },
            [&](std::size_t s) {
              return refClass(s) == nullptr ? nullptr : minuteOf(*refClass(s), worst[s]);
            },
            cs.worstMinute, cs.worstMinuteUnloaded);
        sum.classes.push_back(std::move(cs));
      }
      auto r = [&](std::size_t s) -> const ArmResult& { return arm(s, a); };
      sum.holBlockedShare = over(ns, [&](std::size_t s) {
        return r(s).cyclesWithWork == 0 ? 0.0
                                        : double(r(s).gatedCycles) / double(r(s).cyclesWithWork);
      });
      sum.saturationMean = over(ns, [&](std::size_t s) { return r(s).meanSaturation; });
      sum.saturationP99 = over(ns, [&](std::size_t s) { return r(s).saturationP99; });
      sum.poolLoadMean = over(ns, [&](std::size_t s) { return r(s).poolLoadMean; });
      sum.poolLoadP99 = over(ns, [&](std::size_t s) { return r(s).poolLoadP99; });
      sum.maxServerQueue = over(ns, [&](std::size_t s) { return double(r(s).maxServerQueue); });
      sum.dispatchesPerScrapeP50 =
          over(ns, [&](std::size_t s) { return r(s).dispatchesPerScrape.p50; });
      sum.dispatchesPerScrapeP99 =
          over(ns, [&](std::size_t s) { return r(s).dispatchesPerScrape.p99; });
      sum.dispatchesPerScrapeMax =
          over(ns, [&](std::size_t s) { return r(s).dispatchesPerScrapeMax; });
      sum.evictions = over(ns, [&](std::size_t s) { return double(r(s).inFlightEvictions); });
      sum.wastedTokens = over(ns, [&](std::size_t s) { return double(r(s).wastedTokens); });
      sum.repaidPrefillTokens =
          over(ns, [&](std::size_t s) { return double(r(s).repaidPrefillTokens); });
      sum.eviction = options.arms[a].eviction;
      sum.revocationsIssued =
          over(ns, [&](std::size_t s) { return double(r(s).revocationsIssued); });
      sum.evictionsPerTopRequest = over(ns, [&](std::size_t s) {
        const ClassResult* top = nullptr;
        for (const ClassResult& c : r(s).classes) {
          if (top == nullptr || c.priority > top->priority) top = &c;
        }
        return top == nullptr ? kNoValue
                              : ratio(double(r(s).inFlightEvictions), double(top->arrived));
      });
      sum.engineScheduling = engineSchedulingOf(scenario, options.arms[a]);
      sum.preemptions = over(ns, [&](std::size_t s) { return double(r(s).preemptions); });
      sum.recomputedTokens = over(ns, [&](std::size_t s) { return double(r(s).recomputedTokens); });
      sum.preemptionsPerTopRequest = over(ns, [&](std::size_t s) {
        const ClassResult* top = nullptr;
        for (const ClassResult& c : r(s).classes) {
          if (top == nullptr || c.priority > top->priority) top = &c;
        }
        return top == nullptr ? kNoValue : ratio(double(r(s).preemptions), double(top->arrived));
      });
      report.arms.push_back(std::move(sum));
    }
    if (ns > 0) {
      for (std::size_t a = 0; a < na; ++a)
        report.firstSeed.push_back(std::move(arms[d * ns * na + a]));
    }
    out.reports.push_back(std::move(report));
  }
  return out;
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
