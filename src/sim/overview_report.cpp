// The compact summary `holdback simulate` prints by default (src/sim/evaluate.hpp, formatOverview):
// the recommended arm against none, static-1.0 and the best other arm, per detector.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/arms.hpp"
#include "sim/evaluate.hpp"
#include "sim/text_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace {

// The windows the summary shows, in reading order: burst, onset, idle, settled when the report
// has them, else all.
std::vector<std::string> shownWindows(const ClassSummary& top) {
  std::vector<std::string> out;
  for (const char* w : {"burst", "onset", "idle", "settled"}) {
    if (findWindow(top, w) != nullptr) out.emplace_back(w);
  }
  if (out.empty()) out = {"all", "worst min"};  // no on/off phases (a trace): the worst minute
  return out;
}

// The figure of a window, or no value when the arm lacks the window.
Spread windowFigure(const ClassSummary& c, std::string_view window, Spread WindowSummary::*field) {
  if (window == "worst min") return c.worstMinute.*field;
  const WindowSummary* w = findWindow(c, window);
  return w == nullptr ? Spread{} : w->*field;
}

// Burst (or all) p99 / unloaded of the top class, idle (or all) and whole-run goodput % of
// static-1.0 of the lowest class: the figures bestOtherArm() ranks by.
struct Ranked {
  double p99 = kNoValue;
  double idleGoodput = kNoValue;
  double goodput = kNoValue;
};

Ranked ranked(const ArmSummary& a) {
  const auto [top, bottom] = topAndBottomClass(a.classes);
  const bool windows = findWindow(a.classes[top], "burst") != nullptr;
  return {
      .p99 = windowFigure(a.classes[top], windows ? "burst" : "all",
                          &WindowSummary::ttftP99OverUnloaded)
                 .mean,
      .idleGoodput = windowFigure(a.classes[bottom], windows ? "idle" : "all",
                                  &WindowSummary::outputTokensPctOfStatic)
                         .mean,
      .goodput =
          windowFigure(a.classes[bottom], "all", &WindowSummary::outputTokensPctOfStatic).mean,
  };
}

// NaN sorts last.
bool lower(double a, double b) {
  if (std::isnan(a)) return false;
  return std::isnan(b) || a < b;
}

}  // namespace

std::optional<std::size_t> bestOtherArm(const DetectorReport& report,
                                        std::string_view recommended) {
  std::optional<std::size_t> best;
  std::optional<std::size_t> highestGoodput;
  Ranked bestFigures;
  for (std::size_t i = 0; i < report.arms.size(); ++i) {
    const ArmSummary& a = report.arms[i];
    if (a.name == "none" || a.name == "static-1.0" || a.name == recommended || a.classes.empty()) {
      continue;
    }
    const Ranked r = ranked(a);
    if (!highestGoodput || lower(ranked(report.arms[*highestGoodput]).goodput, r.goodput)) {
      highestGoodput = i;
    }
    if (!(r.idleGoodput >= 90.0)) continue;
    const bool better = !best || lower(r.p99, bestFigures.p99) ||
                        (!lower(bestFigures.p99, r.p99) && lower(bestFigures.goodput, r.goodput));
    if (better) {
      best = i;
      bestFigures = r;
    }
  }
  return best ? best : highestGoodput;
}

std::string formatOverview(const Evaluation& e) {
  std::ostringstream out;
  std::size_t armCount = 0;
  for (const DetectorReport& report : e.reports) {
    if (report.arms.empty() || report.arms.front().classes.empty()) continue;
    armCount = report.arms.size();
    const std::string_view recommended = kRecommendedArm;
    // The rows: none, static-1.0, the best other arm, the recommended one (those the run has).
    std::vector<std::pair<std::size_t, std::string>> rows;
    for (std::size_t i = 0; i < report.arms.size(); ++i) {
      if (report.arms[i].name == "none") rows.emplace_back(i, "no flow control");
    }
    for (std::size_t i = 0; i < report.arms.size(); ++i) {
      if (report.arms[i].name == "static-1.0") rows.emplace_back(i, "uniform ceiling 1.0");
    }
    if (const auto best = bestOtherArm(report, recommended)) rows.emplace_back(*best, "best other");
    for (std::size_t i = 0; i < report.arms.size(); ++i) {
      if (report.arms[i].name == recommended) rows.emplace_back(i, "recommended");
    }

    const auto [top, bottom] = topAndBottomClass(report.arms.front().classes);
    const ClassSummary& t0 = report.arms.front().classes[top];
    const std::vector<std::string> windows = shownWindows(t0);
    const bool idle = findWindow(t0, "idle") != nullptr;
    // With several seeds each arm's row of means is followed by a row of min-max.
    const bool spread = e.seeds.size() > 1;
    std::vector<text::TextTable::Column> columns{{0, true}, {0, true}};
    columns.insert(columns.end(), windows.size() + (idle ? 3 : 2), {8});
    text::TextTable table(std::move(columns));
    std::vector<std::string> header{"arm", "role"};
    header.insert(header.end(), windows.begin(), windows.end());
    header.emplace_back("goodput");
    if (idle) header.emplace_back("idle gp");
    header.emplace_back("evicted");
    table.row(std::move(header));
    for (const auto& [i, role] : rows) {
      const ArmSummary& a = report.arms[i];
      std::vector<std::pair<Spread, int>> figures;  // figure, decimals
      for (const std::string& w : windows) {
        figures.emplace_back(windowFigure(a.classes[top], w, &WindowSummary::ttftP99OverUnloaded),
                             1);
      }
      figures.emplace_back(
          windowFigure(a.classes[bottom], "all", &WindowSummary::outputTokensPctOfStatic), 0);
      if (idle) {
        figures.emplace_back(
            windowFigure(a.classes[bottom], "idle", &WindowSummary::outputTokensPctOfStatic), 0);
      }
      figures.emplace_back(a.evictions, 0);
      std::vector<std::string> means{a.name, role};
      std::vector<std::string> ranges{"", "  min-max"};
      for (const auto& [f, decimals] : figures) {
        means.push_back(text::fixed(f.mean, decimals));
        ranges.push_back(std::isnan(f.mean)
                             ? "-"
                             : text::fixed(f.min, decimals) + "-" + text::fixed(f.max, decimals));
      }
      table.row(std::move(means));
      if (spread) table.row(std::move(ranges));
    }
    out << "\n== " << e.scenario.name << ", " << toString(report.detector) << " detector, "
        << e.seeds.size() << (e.seeds.size() == 1 ? " seed" : " seeds")
        << (spread ? ": mean, then min-max over seeds" : "") << "\n"
        << t0.name << " TTFT p99 as x unloaded per window; "
        << report.arms.front().classes[bottom].name << " goodput % of static-1.0"
        << (idle ? " (all, idle)" : "") << "; evictions\n"
        << table.str();
    if (std::none_of(rows.begin(), rows.end(),
                     [&](const auto& r) { return report.arms[r.first].name == recommended; })) {
      out << "(the recommended arm, " << recommended << ", did not run: see --arms)\n";
    }
  }
  out << "\nrecommended: " << kRecommendedArm
      << " (examples/configs/recommended.yaml, docs/guide/policies.md)\n"
      << kBestOtherArmRule << "\n"
      << "all " << armCount
      << " arms in full: --detail; pictures: --plot DIR; JSON: --format json; docs/simulation.md\n";
  return out.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
