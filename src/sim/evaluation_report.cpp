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

namespace {

std::string num(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string cell(const Spread& s, int decimals, bool spread) {
  std::string out = num(s.mean, decimals);
  if (spread && !std::isnan(s.mean)) {
    out += " (" + num(s.min, decimals) + "-" + num(s.max, decimals) + ")";
  }
  return out;
}

std::string padLeft(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string padRight(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

// The top (highest priority) and bottom class indices.
std::pair<std::size_t, std::size_t> topBottom(const std::vector<ClassSummary>& cs) {
  std::size_t top = 0;
  std::size_t bottom = 0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].priority > cs[top].priority) top = i;
    if (cs[i].priority < cs[bottom].priority) bottom = i;
  }
  return {top, bottom};
}

const WindowSummary* find(const ClassSummary& c, std::string_view name) {
  for (const WindowSummary& w : c.windows) {
    if (w.window == name) return &w;
  }
  return nullptr;
}

}  // namespace

std::string formatSummary(const Evaluation& e) {
  std::ostringstream out;
  const bool spread = e.seeds.size() > 1;
  for (const DetectorReport& report : e.reports) {
    if (report.arms.empty() || report.arms.front().classes.empty()) continue;
    const auto [top, bottom] = topBottom(report.arms.front().classes);
    const ClassSummary& t0 = report.arms.front().classes[top];
    const bool windows = find(t0, "burst") != nullptr;
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
    } else if (pool.concurrencyMode != CountedResource::kRequests) {
      settings += std::string("counting ") + std::string(toString(pool.concurrencyMode)) + ", ";
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
    out << padRight("arm", 16);
    if (windows) {
      out << padLeft("p99 burst", wide) << padLeft("p99 onset", wide) << padLeft("p99 idle", wide)
          << padLeft("x unl. burst", wide) << padLeft("x unl. onset", wide);
    } else {
      out << padLeft("p99", wide) << padLeft("x unloaded", wide);
    }
    out << padLeft("goodput", wide) << padLeft("% static", wide) << "\n";
    for (const ArmSummary& a : report.arms) {
      const ClassSummary& t = a.classes[top];
      const ClassSummary& b = a.classes[bottom];
      out << padRight(a.name, 16);
      if (windows) {
        out << padLeft(cell(find(t, "burst")->ttftP99, 0, spread), wide)
            << padLeft(cell(find(t, "onset")->ttftP99, 0, spread), wide)
            << padLeft(cell(find(t, "idle")->ttftP99, 0, spread), wide)
            << padLeft(cell(find(t, "burst")->ttftP99OverUnloaded, 1, spread), wide)
            << padLeft(cell(find(t, "onset")->ttftP99OverUnloaded, 1, spread), wide);
      } else {
        out << padLeft(cell(find(t, "all")->ttftP99, 0, spread), wide)
            << padLeft(cell(find(t, "all")->ttftP99OverUnloaded, 1, spread), wide);
      }
      out << padLeft(cell(find(b, "all")->outputTokensPerSec, 0, spread), wide)
          << padLeft(cell(find(b, "all")->outputTokensPctOfStatic, 0, spread), wide) << "\n";
    }
    out << "signal health (sat.: the saturation the gateways see; load: the pool's true "
           "(running + server-queued) / slots; disp.: requests dispatched per scrape interval)\n"
        << padRight("arm", 16) << padLeft("sat. mean", wide) << padLeft("sat. p99", wide)
        << padLeft("load mean", wide) << padLeft("load p99", wide) << padLeft("max srv queue", wide)
        << padLeft("disp. p50", wide) << padLeft("disp. p99", wide) << padLeft("disp. max", wide)
        << "\n";
    for (const ArmSummary& a : report.arms) {
      out << padRight(a.name, 16) << padLeft(cell(a.saturationMean, 2, spread), wide)
          << padLeft(cell(a.saturationP99, 2, spread), wide)
          << padLeft(cell(a.poolLoadMean, 2, spread), wide)
          << padLeft(cell(a.poolLoadP99, 2, spread), wide)
          << padLeft(cell(a.maxServerQueue, 0, spread), wide)
          << padLeft(cell(a.dispatchesPerScrapeP50, 0, spread), wide)
          << padLeft(cell(a.dispatchesPerScrapeP99, 0, spread), wide)
          << padLeft(cell(a.dispatchesPerScrapeMax, 0, spread), wide) << "\n";
    }
    const bool anyEviction = std::any_of(report.arms.begin(), report.arms.end(),
                                         [](const ArmSummary& a) { return a.eviction; });
    if (!anyEviction) continue;
    const ClassSummary& b0 = report.arms.front().classes[bottom];
    out << "in-flight eviction (revocation latency " << num(pool.revocationLatencyMs)
        << " ms): revocations issued, requests aborted per " << t0.name << " request, " << b0.name
        << " output tokens wasted (% of generated), prefill tokens paid again, " << t0.name
        << " TTFT p99 / unloaded in " << (windows ? "idle and settled" : "all") << ", " << b0.name
        << " goodput % of static-1.0" << (windows ? " in idle and burst" : "") << "\n";
    const std::size_t w2 = std::max<std::size_t>(wide, 16);
    out << padRight("arm", 20) << padLeft("issued", w2) << padLeft("per top req", w2)
        << padLeft("wasted %", w2) << padLeft("re-paid prefill", w2);
    if (windows) {
      out << padLeft("x unl. idle", w2) << padLeft("x unl. settled", w2)
          << padLeft("% static idle", w2) << padLeft("% static burst", w2);
    } else {
      out << padLeft("x unloaded", w2) << padLeft("% static", w2);
    }
    out << "\n";
    for (const ArmSummary& a : report.arms) {
      const ClassSummary& t = a.classes[top];
      const ClassSummary& b = a.classes[bottom];
      out << padRight(a.name, 20) << padLeft(cell(a.revocationsIssued, 0, spread), w2)
          << padLeft(cell(a.evictionsPerTopRequest, 3, spread), w2)
          << padLeft(cell(b.wastedPct, 2, spread), w2)
          << padLeft(cell(b.repaidPrefillTokens, 0, spread), w2);
      if (windows) {
        out << padLeft(cell(find(t, "idle")->ttftP99OverUnloaded, 1, spread), w2)
            << padLeft(cell(find(t, "settled")->ttftP99OverUnloaded, 1, spread), w2)
            << padLeft(cell(find(b, "idle")->outputTokensPctOfStatic, 0, spread), w2)
            << padLeft(cell(find(b, "burst")->outputTokensPctOfStatic, 0, spread), w2);
      } else {
        out << padLeft(cell(find(t, "all")->ttftP99OverUnloaded, 1, spread), w2)
            << padLeft(cell(find(b, "all")->outputTokensPctOfStatic, 0, spread), w2);
      }
      out << "\n";
    }
  }
  return out.str();
}

std::string paretoCsv(const Evaluation& e) {
  std::ostringstream out;
  out << "scenario,detector,arm,goodput_mean,goodput_min,goodput_max,p99_burst_mean,"
         "p99_burst_min,p99_burst_max,p99_onset_mean,p99_onset_min,p99_onset_max\n";
  auto csv = [](const Spread& s) {
    return num(s.mean, 3) + "," + num(s.min, 3) + "," + num(s.max, 3);
  };
  for (const DetectorReport& report : e.reports) {
    for (const ArmSummary& a : report.arms) {
      const auto [top, bottom] = topBottom(a.classes);
      const WindowSummary* burst = find(a.classes[top], "burst");
      const WindowSummary* onset = find(a.classes[top], "onset");
      if (burst == nullptr) burst = find(a.classes[top], "all");
      if (onset == nullptr) onset = burst;
      out << e.scenario.name << ',' << toString(report.detector) << ',' << a.name << ','
          << csv(find(a.classes[bottom], "all")->outputTokensPerSec) << ',' << csv(burst->ttftP99)
          << ',' << csv(onset->ttftP99) << '\n';
    }
  }
  return out.str();
}

std::string paretoGnuplot(const Evaluation& e) {
  std::ostringstream g;
  g << "# Generated by `holdback simulate --plot`: the trade-off, one point per arm (mean over\n"
       "# seeds, bars min-max). Run with `gnuplot pareto.gp` next to pareto.csv.\n"
       "set datafile separator ','\nset datafile missing '-'\n"
       "set terminal pngcairo size 1000,650 noenhanced\nset grid\nset logscale y\n"
       "set key outside right\n"
       "set xlabel 'lowest class goodput (output tokens/s, whole measured time)'\n"
       "set ylabel 'top class TTFT p99 (ms, log)'\n";
  for (const DetectorReport& report : e.reports) {
    const std::string d(toString(report.detector));
    g << "set output 'pareto-" << e.scenario.name << "-" << d << ".png'\n"
      << "set title 'Trade-off: " << e.scenario.name << ", " << d << " detector, " << e.seeds.size()
      << " seed(s)'\n"
      << "plot 'pareto.csv' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):7:5:6:8:9 with xyerrorbars pt 7 title 'p99 burst', \\\n"
      << "     '' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):10:5:6:11:12 with xyerrorbars pt 5 title 'p99 onset', \\\n"
      << "     '' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):7:(stringcolumn(3)) with labels offset 1,1 notitle\n";
  }
  g << "set output\n";
  return g.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
