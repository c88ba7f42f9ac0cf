// The reports of an evaluation over seeds (src/sim/evaluate.hpp): the JSON document and the
// full summary tables (the compact summary is overview_report.cpp, the Pareto data and picture
// pareto_report.cpp).
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

// One window's figures: means, the unloaded baseline's TTFT and the spreads.
Json windowJson(const WindowSummary& ws, const WindowSummary& unloaded) {
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
  wj["unloadedTtftMs"] = {{"p50", number(unloaded.ttftP50.mean)},
                          {"p95", number(unloaded.ttftP95.mean)},
                          {"p99", number(unloaded.ttftP99.mean)}};
  wj["spread"] = std::move(spread);
  return wj;
}

}  // namespace

std::string formatJson(const Evaluation& e) {
  Json doc;
  doc["schemaVersion"] = 1;
  if (!e.mode.empty()) doc["mode"] = e.mode;
  doc["scenario"] = e.scenario.name;
  doc["seeds"] = e.seeds;
  doc["spread"] = "min-max over seeds";
  doc["durationSeconds"] = e.scenario.durationSeconds;
  doc["gatewayReplicas"] = e.scenario.pool.gatewayReplicas;
  if (e.scenario.pool.replicaSyncIntervalMs > 0.0) {  // absent when off: older documents unchanged
    doc["replicaSyncIntervalMs"] = e.scenario.pool.replicaSyncIntervalMs;
  }
  if (e.scenario.pool.replicaFeed) doc["replicaFeedDelayMs"] = e.scenario.pool.replicaFeedDelayMs;
  if (e.scenario.pool.engineScheduling != EngineScheduling::kFcfs) {  // absent with fcfs servers
    doc["engineScheduling"] = std::string(toString(e.scenario.pool.engineScheduling));
  }
  if (e.scenario.pool.replicaMode == ReplicaMode::kReserve) {  // absent in share mode, as before
    doc["replicaMode"] = std::string(toString(e.scenario.pool.replicaMode));
    doc["replicaReserveRttMs"] = e.scenario.pool.replicaReserveRttMs;
  }
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
          cj["windows"][c.windows[w].window] = windowJson(c.windows[w], c.unloaded[w]);
        }
        // Added after the other windows: a document without them reads as before.
        cj["windows"]["minutes"] = Json::array();
        for (std::size_t m = 0; m < c.minutes.size(); ++m) {
          Json mj = windowJson(c.minutes[m], c.minutesUnloaded[m]);
          mj["minute"] = m;
          cj["windows"]["minutes"].push_back(std::move(mj));
        }
        Json worst = windowJson(c.worstMinute, c.worstMinuteUnloaded);
        worst["minute"] = Json::array();
        for (const double m : c.worstMinuteIndex) worst["minute"].push_back(number(m));
        cj["windows"]["worstMinute"] = std::move(worst);
        Json spread;
        Sink sink{cj, spread};
        sink.put("rejected", c.rejected);
        sink.put("evicted", c.evicted);
        sink.put("unfinished", c.unfinished);
        sink.put("tooLarge", c.tooLarge);
        sink.put("revoked", c.revoked);
        sink.put("wastedTokens", c.wastedTokens);
        sink.put("repaidPrefillTokens", c.repaidPrefillTokens);
        sink.put("wastedPct", c.wastedPct);
        if (a.engineScheduling != EngineScheduling::kFcfs) {  // absent with fcfs servers
          sink.put("preemptions", c.preemptions);
          sink.put("recomputedTokens", c.recomputedTokens);
          sink.put("recomputedPct", c.recomputedPct);
        }
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
      if (a.engineScheduling != EngineScheduling::kFcfs) {  // absent with fcfs servers
        aj["engineScheduling"] = std::string(toString(a.engineScheduling));
        sink2.put("preemptions", a.preemptions);
        sink2.put("recomputedTokens", a.recomputedTokens);
        sink2.put("preemptionsPerTopRequest", a.preemptionsPerTopRequest);
      }
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
    } else if (pool.concurrencyMode != CountedResource::kRequests) {
      settings += std::string("counting ") + std::string(toString(pool.concurrencyMode)) + ", ";
    }
    if (pool.scrapeIntervalMs != PoolSpec{}.scrapeIntervalMs) {
      settings += "scrape " + num(pool.scrapeIntervalMs) + " ms, ";
    }
    if (pool.gatewayReplicas > 1) settings += std::to_string(pool.gatewayReplicas) + " replicas, ";
    if (pool.gatewayReplicas > 1 && pool.replicaSyncIntervalMs > 0.0) {
      settings += "replica sync " + num(pool.replicaSyncIntervalMs) + " ms, ";
      if (pool.replicaFeed) settings += "replica feed " + num(pool.replicaFeedDelayMs) + " ms, ";
      if (pool.replicaMode == ReplicaMode::kReserve) {
        settings += "reserve mode, round trip " + num(pool.replicaReserveRttMs) + " ms, ";
      }
    }
    if (pool.engineScheduling != EngineScheduling::kFcfs) {
      settings += std::string(toString(pool.engineScheduling)) + " servers, ";
    }
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
    text::TextTable trade = table(16, windows ? 7 : 6, wide);
    if (windows) {
      trade.row({"arm", "p99 burst", "p99 onset", "p99 idle", "x unl. burst", "x unl. onset",
                 "goodput", "% static"});
    } else {
      trade.row(
          {"arm", "p99", "x unloaded", "p99 worst min", "x unl. worst min", "goodput", "% static"});
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
                               formatSpread(findWindow(t, "all")->ttftP99OverUnloaded, 1, spread),
                               formatSpread(t.worstMinute.ttftP99, 0, spread),
                               formatSpread(t.worstMinute.ttftP99OverUnloaded, 1, spread)});
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
    if (std::any_of(report.arms.begin(), report.arms.end(), [](const ArmSummary& a) {
          return a.engineScheduling != EngineScheduling::kFcfs;
        })) {
      const ClassSummary& b0 = report.arms.front().classes[bottom];
      out << "engine scheduling: the servers' order, preemptions per " << t0.name << " request, "
          << b0.name
          << " preemptions, tokens recomputed (prompt + output so far, % of generated)\n";
      text::TextTable engine = table(20, 4, std::max<std::size_t>(wide, 16));
      engine.row({"arm", "servers", "per top req", "preemptions", "recomputed %"});
      for (const ArmSummary& a : report.arms) {
        const ClassSummary& b = a.classes[bottom];
        engine.row({a.name, std::string(toString(a.engineScheduling)),
                    formatSpread(a.preemptionsPerTopRequest, 3, spread),
                    formatSpread(b.preemptions, 0, spread),
                    formatSpread(b.recomputedPct, 2, spread)});
      }
      out << engine.str();
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

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
