// The reports of an evaluation over seeds (src/sim/evaluate.hpp): the JSON document,
// the summary table and the Pareto data and script.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>

#include "holdback/config/json.hpp"
#include "sim/evaluate.hpp"
#include "sim/text_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

using config::Json;

Json number(double v) {
  return std::isnan(v) ? Json(nullptr) : Json(v);
}
Json range(const Spread& s) {
  return Json::array({number(s.min), number(s.max)});
}

// Puts the means under `mean` and the [min, max] pairs under `spread`.
struct Sink {
  Json& mean;
  Json& spread;
  void put(const std::string& key, const Spread& s) {
    mean[key] = number(s.mean);
    spread[key] = range(s);
  }
  void put(const std::string& group, const std::string& key, const Spread& s) {
    mean[group][key] = number(s.mean);
    spread[group][key] = range(s);
  }
};

}  // namespace

std::string formatJson(const Evaluation& e) {
  Json doc;
  doc["schemaVersion"] = 1;
  doc["scenario"] = e.scenario.name;
  doc["seeds"] = e.seeds;
  doc["spread"] = "min-max over seeds";
  doc["durationSeconds"] = e.scenario.durationSeconds;
  doc["gatewayReplicas"] = e.scenario.pool.gatewayReplicas;
  doc["reports"] = Json::array();
  for (const DetectorReport& report : e.reports) {
    Json rj;
    rj["detector"] = std::string(toString(report.detector));
    rj["arms"] = Json::array();
    for (const ArmSummary& a : report.arms) {
      Json aj;
      aj["name"] = a.name;
      aj["classes"] = Json::array();
      for (const ClassSummary& c : a.classes) {
        Json cj;
        cj["name"] = c.name;
        cj["priority"] = c.priority;
        cj["windows"] = Json::object();
        for (std::size_t w = 0; w < c.windows.size(); ++w) {
          const WindowSummary& ws = c.windows[w];
          Json wj;
          Json spread;
          Sink sink{wj, spread};
          sink.put("n", ws.n);
          sink.put("ttftMs", "p50", ws.ttftP50);
          sink.put("ttftMs", "p95", ws.ttftP95);
          sink.put("ttftMs", "p99", ws.ttftP99);
          sink.put("ttftP99OverUnloaded", ws.ttftP99OverUnloaded);
          sink.put("queueMs", "p50", ws.queueP50);
          sink.put("queueMs", "p95", ws.queueP95);
          sink.put("queueMs", "p99", ws.queueP99);
          sink.put("donePerSec", ws.donePerSec);
          sink.put("outputTokensPerSec", ws.outputTokensPerSec);
          sink.put("outputTokensPctOfStatic", ws.outputTokensPctOfStatic);
          wj["unloadedTtftMs"] = {{"p50", number(c.unloaded[w].ttftP50.mean)},
                                  {"p95", number(c.unloaded[w].ttftP95.mean)},
                                  {"p99", number(c.unloaded[w].ttftP99.mean)}};
          wj["spread"] = std::move(spread);
          cj["windows"][ws.window] = std::move(wj);
        }
        Json spread;
        Sink sink{cj, spread};
        sink.put("rejected", c.rejected);
        sink.put("evicted", c.evicted);
        sink.put("unfinished", c.unfinished);
        sink.put("revoked", c.revoked);
        sink.put("wastedTokens", c.wastedTokens);
        sink.put("repaidPrefillTokens", c.repaidPrefillTokens);
        sink.put("wastedPct", c.wastedPct);
        cj["spread"] = std::move(spread);
        aj["classes"].push_back(std::move(cj));
      }
      Json sj;
      Json spread;
      Sink sink{sj, spread};
      sink.put("saturationMean", a.saturationMean);
      sink.put("saturationP99", a.saturationP99);
      sink.put("poolLoadMean", a.poolLoadMean);
      sink.put("poolLoadP99", a.poolLoadP99);
      sink.put("maxServerQueue", a.maxServerQueue);
      sink.put("dispatchesPerScrape", "p50", a.dispatchesPerScrapeP50);
      sink.put("dispatchesPerScrape", "p99", a.dispatchesPerScrapeP99);
      sink.put("dispatchesPerScrape", "max", a.dispatchesPerScrapeMax);
      sink.put("holBlockedShare", a.holBlockedShare);
      sj["spread"] = std::move(spread);
      aj["signal"] = std::move(sj);
      Json spread2;
      Sink sink2{aj, spread2};
      sink2.put("evictions", a.evictions);
      sink2.put("wastedTokens", a.wastedTokens);
      sink2.put("repaidPrefillTokens", a.repaidPrefillTokens);
      aj["eviction"] = a.eviction;
      sink2.put("revocationsIssued", a.revocationsIssued);
      sink2.put("evictionsPerTopRequest", a.evictionsPerTopRequest);
      aj["spread"] = std::move(spread2);
      rj["arms"].push_back(std::move(aj));
    }
    doc["reports"].push_back(std::move(rj));
  }
  return doc.dump(2) + "\n";
}

// ---------------------------------------------------------------------------------------------
// Summary table and Pareto data

std::pair<std::size_t, std::size_t> topAndBottomClass(const std::vector<ClassSummary>& cs) {
  std::size_t top = 0;
  std::size_t bottom = 0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].priority > cs[top].priority) top = i;
    if (cs[i].priority < cs[bottom].priority) bottom = i;
  }
  return {top, bottom};
}

const WindowSummary* findWindow(const ClassSummary& c, std::string_view name) {
  for (const WindowSummary& w : c.windows) {
    if (w.window == name) return &w;
  }
  return nullptr;
}

std::string formatSpread(const Spread& s, int decimals, bool spread) {
  std::string out = text::fixed(s.mean, decimals);
  if (spread && !std::isnan(s.mean)) {
    out += " (" + text::fixed(s.min, decimals) + "-" + text::fixed(s.max, decimals) + ")";
  }
  return out;
}

std::string formatSummary(const Evaluation& e) {
  std::ostringstream out;
  const bool spread = e.seeds.size() > 1;
  for (const DetectorReport& report : e.reports) {
    if (report.arms.empty() || report.arms.front().classes.empty()) continue;
    const auto [top, bottom] = topAndBottomClass(report.arms.front().classes);
    const ClassSummary& t0 = report.arms.front().classes[top];
    const bool windows = findWindow(t0, "burst") != nullptr;
    // Non-default gateway settings (pool.*), so that a table says what produced it.
    std::string settings;
    const auto num = [](double v) {
      std::ostringstream o;
      o << v;
      return o.str();
    };
    const PoolSpec& pool = e.scenario.pool;
    if (report.detector == DetectorKind::kUtilization) {
      // The ledger and the slot term are on by default: name them only when off.
      if (!pool.dispatchLedger) settings += "no dispatch ledger, ";
      if (pool.dispatchLedger && pool.ledgerBudget) settings += "ledger budget, ";
      if (pool.dispatchLedger && pool.ledgerCreditCompletions) {
        settings += "ledger credits completions, ";
      }
      if (pool.dispatchLedger && pool.lostCompletions > 0.0) {
        settings += num(100.0 * pool.lostCompletions) + " % completions lost, ";
      }
      if (!pool.slotTerm) settings += "no slot term, ";
    }
    if (pool.scrapeIntervalMs != PoolSpec{}.scrapeIntervalMs) {
      settings += "scrape " + num(pool.scrapeIntervalMs) + " ms, ";
    }
    if (pool.gatewayReplicas > 1) settings += std::to_string(pool.gatewayReplicas) + " replicas, ";
    out << "\n== " << e.scenario.name << ", " << toString(report.detector) << " detector, "
        << settings << e.seeds.size() << (e.seeds.size() == 1 ? " seed" : " seeds")
        << (spread ? ": mean (min-max over seeds)" : "") << "\n";
    out << t0.name << " TTFT p99 (ms) and its ratio to the unloaded p99; "
        << report.arms.front().classes[bottom].name
        << " goodput (output tok/s over the measured time) and its % of static-1.0\n";
    const std::size_t wide = spread ? 22 : 14;
    using Col = text::TextTable::Column;
    auto table = [&](std::size_t minName, std::size_t n, std::size_t width) {
      std::vector<Col> cs{{minName, true}};
      cs.insert(cs.end(), n, Col{width});
      return text::TextTable(std::move(cs));
    };
    text::TextTable trade = table(16, windows ? 7 : 4, wide);
    if (windows) {
      trade.row({"arm", "p99 burst", "p99 onset", "p99 idle", "x unl. burst", "x unl. onset",
                 "goodput", "% static"});
    } else {
      trade.row({"arm", "p99", "x unloaded", "goodput", "% static"});
    }
    for (const ArmSummary& a : report.arms) {
      const ClassSummary& t = a.classes[top];
      const ClassSummary& b = a.classes[bottom];
      std::vector<std::string> row{a.name};
      if (windows) {
        row.insert(row.end(),
                   {formatSpread(findWindow(t, "burst")->ttftP99, 0, spread),
                    formatSpread(findWindow(t, "onset")->ttftP99, 0, spread),
                    formatSpread(findWindow(t, "idle")->ttftP99, 0, spread),
                    formatSpread(findWindow(t, "burst")->ttftP99OverUnloaded, 1, spread),
                    formatSpread(findWindow(t, "onset")->ttftP99OverUnloaded, 1, spread)});
      } else {
        row.insert(row.end(), {formatSpread(findWindow(t, "all")->ttftP99, 0, spread),
                               formatSpread(findWindow(t, "all")->ttftP99OverUnloaded, 1, spread)});
      }
      row.insert(row.end(),
                 {formatSpread(findWindow(b, "all")->outputTokensPerSec, 0, spread),
                  formatSpread(findWindow(b, "all")->outputTokensPctOfStatic, 0, spread)});
      trade.row(std::move(row));
    }
    out << trade.str();
    out << "signal health (sat.: the saturation the gateways see; load: the pool's true "
           "(running + server-queued) / slots; disp.: requests dispatched per scrape interval)\n";
    text::TextTable health = table(16, 8, wide);
    health.row({"arm", "sat. mean", "sat. p99", "load mean", "load p99", "max srv queue",
                "disp. p50", "disp. p99", "disp. max"});
    for (const ArmSummary& a : report.arms) {
      health.row({a.name, formatSpread(a.saturationMean, 2, spread),
                  formatSpread(a.saturationP99, 2, spread), formatSpread(a.poolLoadMean, 2, spread),
                  formatSpread(a.poolLoadP99, 2, spread), formatSpread(a.maxServerQueue, 0, spread),
                  formatSpread(a.dispatchesPerScrapeP50, 0, spread),
                  formatSpread(a.dispatchesPerScrapeP99, 0, spread),
                  formatSpread(a.dispatchesPerScrapeMax, 0, spread)});
    }
    out << health.str();
    const bool anyEviction = std::any_of(report.arms.begin(), report.arms.end(),
                                         [](const ArmSummary& a) { return a.eviction; });
    if (!anyEviction) continue;
    const ClassSummary& b0 = report.arms.front().classes[bottom];
    out << "in-flight eviction (revocation latency " << num(pool.revocationLatencyMs)
        << " ms): revocations issued, requests aborted per " << t0.name << " request, " << b0.name
        << " output tokens wasted (% of generated), prefill tokens paid again, " << t0.name
        << " TTFT p99 / unloaded in " << (windows ? "idle and settled" : "all") << ", " << b0.name
        << " goodput % of static-1.0" << (windows ? " in idle and burst" : "") << "\n";
    text::TextTable evict = table(20, windows ? 8 : 6, std::max<std::size_t>(wide, 16));
    std::vector<std::string> header{"arm", "issued", "per top req", "wasted %", "re-paid prefill"};
    if (windows) {
      header.insert(header.end(),
                    {"x unl. idle", "x unl. settled", "% static idle", "% static burst"});
    } else {
      header.insert(header.end(), {"x unloaded", "% static"});
    }
    evict.row(std::move(header));
    for (const ArmSummary& a : report.arms) {
      const ClassSummary& t = a.classes[top];
      const ClassSummary& b = a.classes[bottom];
      std::vector<std::string> row{a.name, formatSpread(a.revocationsIssued, 0, spread),
                                   formatSpread(a.evictionsPerTopRequest, 3, spread),
                                   formatSpread(b.wastedPct, 2, spread),
                                   formatSpread(b.repaidPrefillTokens, 0, spread)};
      if (windows) {
        row.insert(row.end(),
                   {formatSpread(findWindow(t, "idle")->ttftP99OverUnloaded, 1, spread),
                    formatSpread(findWindow(t, "settled")->ttftP99OverUnloaded, 1, spread),
                    formatSpread(findWindow(b, "idle")->outputTokensPctOfStatic, 0, spread),
                    formatSpread(findWindow(b, "burst")->outputTokensPctOfStatic, 0, spread)});
      } else {
        row.insert(row.end(),
                   {formatSpread(findWindow(t, "all")->ttftP99OverUnloaded, 1, spread),
                    formatSpread(findWindow(b, "all")->outputTokensPctOfStatic, 0, spread)});
      }
      evict.row(std::move(row));
    }
    out << evict.str();
  }
  return out.str();
}

std::string paretoCsv(const Evaluation& e) {
  std::ostringstream out;
  out << "scenario,detector,arm,goodput_mean,goodput_min,goodput_max,p99_burst_mean,"
         "p99_burst_min,p99_burst_max,p99_onset_mean,p99_onset_min,p99_onset_max\n";
  auto csv = [](const Spread& s) {
    return text::fixed(s.mean, 3) + "," + text::fixed(s.min, 3) + "," + text::fixed(s.max, 3);
  };
  for (const DetectorReport& report : e.reports) {
    for (const ArmSummary& a : report.arms) {
      const auto [top, bottom] = topAndBottomClass(a.classes);
      const WindowSummary* burst = findWindow(a.classes[top], "burst");
      const WindowSummary* onset = findWindow(a.classes[top], "onset");
      if (burst == nullptr) burst = findWindow(a.classes[top], "all");
      if (onset == nullptr) onset = burst;
      out << e.scenario.name << ',' << toString(report.detector) << ',' << a.name << ','
          << csv(findWindow(a.classes[bottom], "all")->outputTokensPerSec) << ','
          << csv(burst->ttftP99) << ',' << csv(onset->ttftP99) << '\n';
    }
  }
  return out.str();
}

namespace {

// Label placement for the Pareto picture. The script fixes the terminal size, the margins and
// the axis ranges, so a text's extent is known in graph units (0-1) and the labels can be placed
// here: the arms whose points (nearly) coincide share one label, one name a line; each label goes
// beside its point, or as close above or below it as it fits without covering another label or
// point, with a thin line to its point when moved.
constexpr double kGraphWidthPx = 1000.0 * (0.97 - 0.09);  // terminal width x margins below
constexpr double kGraphHeightPx = 650.0 * (0.92 - 0.15);
constexpr double kCharWidth = 7.0 / kGraphWidthPx;  // Sans 9
constexpr double kLineHeight = 14.0 / kGraphHeightPx;
constexpr double kPointX = 5.0 / kGraphWidthPx;  // half a point's extent
constexpr double kPointY = 5.0 / kGraphHeightPx;

struct Box {
  double left, right, bottom, top;
  [[nodiscard]] bool overlaps(const Box& o) const {
    return left < o.right && o.left < right && bottom < o.top && o.bottom < top;
  }
  [[nodiscard]] bool inside() const {
    return left >= 0.0 && right <= 1.0 && bottom >= 0.0 && top <= 1.0;
  }
};

std::string gnuplotQuoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The xrange, yrange, labels and arrows of one detector's picture.
std::string paretoLabels(const DetectorReport& report) {
  struct Point {
    std::string name;
    double goodput, burst, onset;  // burst and onset: the top class's p99, ms
  };
  std::vector<Point> points;
  double x0 = kNoValue, x1 = kNoValue, y0 = kNoValue, y1 = kNoValue;
  const auto widen = [](double& lo, double& hi, double v) {
    if (std::isnan(v)) return;
    lo = std::isnan(lo) ? v : std::min(lo, v);
    hi = std::isnan(hi) ? v : std::max(hi, v);
  };
  for (const ArmSummary& a : report.arms) {
    if (a.classes.empty()) continue;
    const auto [top, bottom] = topAndBottomClass(a.classes);
    const WindowSummary* burst = findWindow(a.classes[top], "burst");
    const WindowSummary* onset = findWindow(a.classes[top], "onset");
    if (burst == nullptr) burst = findWindow(a.classes[top], "all");
    if (onset == nullptr) onset = burst;
    const Spread& g = findWindow(a.classes[bottom], "all")->outputTokensPerSec;
    widen(x0, x1, g.min);
    widen(x0, x1, g.max);
    for (const Spread* y : {&burst->ttftP99, &onset->ttftP99}) {
      if (y->min > 0.0) widen(y0, y1, y->min);
      if (y->max > 0.0) widen(y0, y1, y->max);
    }
    points.push_back({a.name, g.mean, burst->ttftP99.mean, onset->ttftP99.mean});
  }
  if (std::isnan(x0) || std::isnan(y0)) return "";
  const double span = std::max(x1 - x0, 1.0);
  x0 -= 0.08 * span;
  x1 += 0.08 * span;
  const double ly0 = std::floor(std::log10(y0));
  const double ly1 = std::max(std::ceil(std::log10(y1)), ly0 + 1.0);
  const auto gx = [&](double x) { return (x - x0) / (x1 - x0); };
  const auto gy = [&](double y) { return (std::log10(y) - ly0) / (ly1 - ly0); };

  std::vector<Box> taken;  // every point, then every placed label
  for (const Point& p : points) {
    for (const double y : {p.burst, p.onset}) {
      if (std::isnan(p.goodput) || !(y > 0.0)) continue;
      taken.push_back(
          {gx(p.goodput) - kPointX, gx(p.goodput) + kPointX, gy(y) - kPointY, gy(y) + kPointY});
    }
  }
  // Groups of arms whose burst points nearly coincide, in order of goodput.
  struct Group {
    double x, y;
    std::vector<std::string> names;
  };
  std::vector<Group> groups;
  for (const Point& p : points) {
    if (std::isnan(p.goodput) || !(p.burst > 0.0)) continue;
    const double x = gx(p.goodput);
    const double y = gy(p.burst);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& o) {
      return std::abs(o.x - x) < 2 * kPointX && std::abs(o.y - y) < 2 * kPointY;
    });
    if (g == groups.end()) {
      groups.push_back({x, y, {p.name}});
    } else {
      g->names.push_back(p.name);
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.x < b.x; });

  std::ostringstream g;
  g << "set xrange [" << x0 << ":" << x1 << "]\nset yrange [" << std::pow(10.0, ly0) << ":"
    << std::pow(10.0, ly1) << "]\nunset label\nunset arrow\n";
  int id = 0;
  for (const Group& group : groups) {
    std::size_t longest = 0;
    std::string text;
    for (const std::string& n : group.names) {
      longest = std::max(longest, n.size());
      text += (text.empty() ? "" : "\n") + n;
    }
    const double width = static_cast<double>(longest) * kCharWidth;
    const double lines = static_cast<double>(group.names.size());
    // The first line is centred on the label's y; the others follow below it.
    const auto box = [&](double x, double y, bool right) {
      const double left = right ? x : x - width;
      return Box{left, left + width, y - (lines - 0.5) * kLineHeight, y + 0.5 * kLineHeight};
    };
    double bestX = group.x + 2 * kPointX;
    double bestY = group.y;
    bool bestRight = true;
    bool found = false;
    for (int step = 0; step <= 24 && !found; ++step) {
      const double dy = (step % 2 == 1 ? 1 : -1) * ((step + 1) / 2) * kLineHeight;
      for (const bool right : {true, false}) {
        const double x = right ? group.x + 2 * kPointX : group.x - 2 * kPointX;
        const double y = group.y + (step == 0 ? 0.0 : dy);
        const Box b = box(x, y, right);
        if (!b.inside() ||
            std::any_of(taken.begin(), taken.end(), [&](const Box& t) { return t.overlaps(b); })) {
          continue;
        }
        bestX = x;
        bestY = y;
        bestRight = right;
        found = true;
        break;
      }
    }
    taken.push_back(box(bestX, bestY, bestRight));
    ++id;
    // gnuplot reads "\n" in a double-quoted string as a line break.
    std::string quoted = gnuplotQuoted(text);
    for (std::size_t at = quoted.find('\n'); at != std::string::npos; at = quoted.find('\n', at)) {
      quoted.replace(at, 1, "\\n");
    }
    g << "set label " << id << " " << quoted << " at graph " << bestX << "," << bestY << " "
      << (bestRight ? "left" : "right") << " front\n";
    if (std::abs(bestY - group.y) > kLineHeight / 2) {
      g << "set arrow " << id << " from graph " << bestX << "," << bestY << " to graph " << group.x
        << "," << group.y << " nohead lw 0.5 lc rgb 'gray50'\n";
    }
  }
  return g.str();
}

}  // namespace

std::string paretoGnuplot(const Evaluation& e) {
  std::ostringstream g;
  g << "# Generated by `holdback simulate --plot`: the trade-off, one point per arm (mean over\n"
       "# seeds, bars min-max). Run with `gnuplot pareto.gp` next to pareto.csv.\n"
       "set datafile separator ','\nset datafile missing '-'\n"
       "set terminal pngcairo size 1000,650 noenhanced font 'Sans,9'\nset grid\nset logscale y\n"
       "set lmargin at screen 0.09\nset rmargin at screen 0.97\n"
       "set tmargin at screen 0.92\nset bmargin at screen 0.15\n"
       "set key below\n"
       "set xlabel 'lowest class goodput (output tokens/s, whole measured time)'\n"
       "set ylabel 'top class TTFT p99 (ms, log)'\n";
  for (const DetectorReport& report : e.reports) {
    const std::string d(toString(report.detector));
    g << "set output 'pareto-" << e.scenario.name << "-" << d << ".png'\n"
      << "set title 'Trade-off: " << e.scenario.name << ", " << d << " detector, " << e.seeds.size()
      << " seed(s); labels at the p99 burst points'\n"
      << paretoLabels(report) << "plot 'pareto.csv' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):7:5:6:8:9 with xyerrorbars pt 7 title 'p99 burst', \\\n"
      << "     '' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):10:5:6:11:12 with xyerrorbars pt 5 title 'p99 onset'\n";
  }
  g << "set output\n";
  return g.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
