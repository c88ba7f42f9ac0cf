// The reports of one seed's runs (src/sim/report.hpp): the text table, the CSV files
// and the gnuplot script.
#include "sim/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string_view>

#include "sim/text_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace {

using text::fixed;

// Pads to `width`, on the left (`right`) or on the right.
std::string pad(const std::string& s, std::size_t width, bool right = true) {
  return right ? text::padLeft(s, width) : text::padRight(s, width);
}

std::string triple(const Percentiles& p) {
  return fixed(p.p50) + " / " + fixed(p.p95) + " / " + fixed(p.p99);
}

const WindowStats* findWindow(const ClassResult& c, std::string_view w) {
  for (const WindowStats& ws : c.windows) {
    if (ws.window == w) return &ws;
  }
  return c.windows.empty() ? nullptr : &c.windows.front();
}

}  // namespace

std::string formatTable(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "scenario: " << describePool(scenario.pool) << ", " << toString(scenario.detector)
      << " detector, scrape " << fixed(scenario.pool.scrapeIntervalMs) << " ms, "
      << fixed(scenario.durationSeconds) << " s, seed " << scenario.seed << "\n";
  out << "times in ms (p50 / p95 / p99); done/s and tok/s are completions inside the window\n";
  // The class column fits the longest class name.
  std::size_t classWidth = 12;
  for (const TrafficClass& c : scenario.classes)
    classWidth = std::max(classWidth, c.name.size() + 1);
  for (const ArmResult& a : arms) {
    const double hol = a.cyclesWithWork == 0 ? 0.0
                                             : 100.0 * static_cast<double>(a.gatedCycles) /
                                                   static_cast<double>(a.cyclesWithWork);
    out << "\n== arm " << a.arm.name << ": head-of-line blocked " << fixed(hol, 1)
        << " % of cycles with queued work, mean saturation " << fixed(a.meanSaturation, 2) << "\n";
    if (a.arm.eviction) {
      out << "in-flight eviction: " << a.revocationsIssued << " revocations issued, "
          << a.inFlightEvictions << " requests aborted (retried), " << a.wastedTokens
          << " output tokens wasted, " << a.repaidPrefillTokens << " prefill tokens paid again\n";
    }
    if (const EngineScheduling mode = engineSchedulingOf(scenario, a.arm);
        mode != EngineScheduling::kFcfs) {
      out << "servers: " << toString(mode) << ", " << a.preemptions << " preemptions, "
          << a.recomputedTokens << " tokens recomputed\n";
    }
    out << pad("class", classWidth, false) << pad("prio", 5) << "  " << pad("window", 6, false)
        << pad("n", 6) << pad("gateway queue", 22) << pad("TTFT", 24) << pad("done/s", 8)
        << pad("tok/s", 8) << pad("rej", 5) << pad("evict", 6) << pad("unfin", 6) << "\n";
    for (const ClassResult& c : a.classes) {
      bool first = true;
      for (const WindowStats& w : c.windows) {
        out << pad(first ? c.name : "", classWidth, false)
            << pad(first ? std::to_string(c.priority) : "", 5) << "  " << pad(w.window, 6, false)
            << pad(std::to_string(w.arrived), 6) << pad(triple(w.queueMs), 22)
            << pad(triple(w.ttftMs), 24) << pad(fixed(w.completedPerSecond, 1), 8)
            << pad(fixed(w.outputTokensPerSecond), 8)
            << pad(first ? std::to_string(c.rejected) : "", 5)
            << pad(first ? std::to_string(c.evicted) : "", 6)
            << pad(first ? std::to_string(c.unfinished) : "", 6) << "\n";
        first = false;
      }
      // Beside "all": the minute with the highest TTFT p99.
      if (const auto m = worstMinute(c)) {
        const WindowStats& w = c.minutes[*m];
        out << pad("", classWidth, false) << pad("", 5) << "  " << pad("worst", 6, false)
            << pad(std::to_string(w.arrived), 6) << pad(triple(w.queueMs), 22)
            << pad(triple(w.ttftMs), 24) << pad(fixed(w.completedPerSecond, 1), 8)
            << pad(fixed(w.outputTokensPerSecond), 8) << "  (minute " << *m << ", "
            << fixed(w.startSeconds) << "-" << fixed(w.startSeconds + w.seconds) << " s)\n";
      }
      if (c.tooLarge > 0) {
        out << pad("", classWidth, false) << "  " << c.tooLarge
            << " requests larger than every endpoint's KV capacity, refused (too-large)\n";
      }
    }
  }
  // The trade-off in one place: top class's burst TTFT p99 against the bottom class's throughput.
  if (!arms.empty() && !arms.front().classes.empty()) {
    std::size_t top = 0;
    std::size_t bottom = 0;
    const auto& cs = arms.front().classes;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (cs[i].priority > cs[top].priority) top = i;
      if (cs[i].priority < cs[bottom].priority) bottom = i;
    }
    const bool windows = cs[top].windows.size() > 1;
    out << "\n== summary: " << cs[top].name << " TTFT p99 vs " << cs[bottom].name
        << " throughput (done/s)\n";
    text::TextTable table({{16, true}, {16}, {windows ? 15u : 0u}, {12}, {windows ? 11u : 0u}});
    table.row({"arm", windows ? "TTFT p99 burst" : "TTFT p99", windows ? "TTFT p99 idle" : "",
               windows ? "tput burst" : "tput", windows ? "tput idle" : ""});
    for (const ArmResult& a : arms) {
      const ClassResult& t = a.classes[top];
      const ClassResult& b = a.classes[bottom];
      table.row({a.arm.name, fixed(findWindow(t, windows ? "burst" : "all")->ttftMs.p99),
                 windows ? fixed(findWindow(t, "idle")->ttftMs.p99) : "",
                 fixed(findWindow(b, windows ? "burst" : "all")->completedPerSecond, 1),
                 windows ? fixed(findWindow(b, "idle")->completedPerSecond, 1) : ""});
    }
    out << table.str();
  }
  return out.str();
}

namespace {
std::string csvNumber(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}
}  // namespace

std::string requestsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,priority,endpoint,input_tokens,output_tokens,arrival_s,dispatched_s,"
         "admitted_s,first_token_s,finished_s,queue_ms,ttft_ms,outcome,gateway\n";
  for (const ArmResult& a : arms) {
    for (const RequestRecord& r : a.requests) {
      const TrafficClass& c = scenario.classes[r.classIndex];
      out << a.arm.name << ',' << c.name << ',' << c.priority << ',' << r.endpoint << ','
          << r.inputTokens << ',' << r.outputTokens << ',' << csvNumber(r.arrival) << ','
          << csvNumber(r.dispatched) << ',' << csvNumber(r.admitted) << ','
          << csvNumber(r.firstToken) << ',' << csvNumber(r.finished) << ','
          << csvNumber((r.dispatched - r.arrival) * 1e3) << ','
          << csvNumber((r.firstToken - r.arrival) * 1e3) << ',' << r.outcome << ',' << r.gateway
          << '\n';
    }
  }
  return out.str();
}

std::string intervalsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,time_s,saturation";
  for (const TrafficClass& c : scenario.classes) {
    out << ",ceiling_" << c.name << ",queued_" << c.name;
  }
  out << ",server_queue,running";
  // The free room each class's ceiling keeps for the classes above it, in requests (slot
  // equivalents of saturation): (1 - ceiling) x the pool's slots.
  for (const TrafficClass& c : scenario.classes) out << ",reserve_" << c.name;
  // The room the pool really had, in both resources: free slots (endpoints x slots - running) and
  // free KV tokens (endpoints x KV capacity - KV held), whichever binds.
  out << ",free_slots,free_kv_tokens\n";
  const auto poolSlots = static_cast<double>(scenario.pool.totalSlots());
  const std::int64_t poolKv = scenario.pool.totalKvCapacityTokens();
  for (const ArmResult& a : arms) {
    for (const IntervalSample& s : a.samples) {
      out << a.arm.name << ',' << csvNumber(s.time) << ',' << csvNumber(s.saturation);
      for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
        out << ',' << csvNumber(s.ceilings[c]) << ',' << s.queued[c];
      }
      std::size_t q = 0;
      std::size_t r = 0;
      for (const std::size_t x : s.serverQueue) q += x;
      for (const std::size_t x : s.running) r += x;
      out << ',' << q << ',' << r;
      for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
        out << ',' << csvNumber((1.0 - s.ceilings[c]) * poolSlots);
      }
      std::int64_t kv = 0;
      for (const std::int64_t x : s.kvTokens) kv += x;
      out << ',' << csvNumber(poolSlots - static_cast<double>(r)) << ',' << poolKv - kv << '\n';
    }
  }
  return out.str();
}

std::string ttftCdfCsv(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,ttft_ms,fraction\n";
  for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
    for (const ArmResult& a : arms) {
      std::vector<double> ttft;
      for (const RequestRecord& r : a.requests) {
        if (r.classIndex == c && r.arrival < scenario.durationSeconds &&
            !std::isnan(r.firstToken)) {
          ttft.push_back((r.firstToken - r.arrival) * 1e3);
        }
      }
      std::sort(ttft.begin(), ttft.end());
      for (std::size_t i = 0; i < ttft.size(); ++i) {
        out << a.arm.name << ',' << scenario.classes[c].name << ',' << csvNumber(ttft[i]) << ','
            << csvNumber(static_cast<double>(i + 1) / static_cast<double>(ttft.size())) << '\n';
      }
    }
  }
  return out.str();
}

std::string summaryCsv(const std::vector<ArmResult>& arms) {
  std::ostringstream out;
  out << "arm,class,priority,window,arrived,queue_p50_ms,queue_p95_ms,queue_p99_ms,ttft_p50_ms,"
         "ttft_p95_ms,ttft_p99_ms,completed_per_s,output_tokens_per_s,rejected,evicted,unfinished,"
         "hol_blocked_share,revoked,wasted_tokens,repaid_prefill_tokens,generated_tokens\n";
  for (const ArmResult& a : arms) {
    const double hol = a.cyclesWithWork == 0 ? 0.0
                                             : static_cast<double>(a.gatedCycles) /
                                                   static_cast<double>(a.cyclesWithWork);
    for (const ClassResult& c : a.classes) {
      for (const WindowStats& w : c.windows) {
        out << a.arm.name << ',' << c.name << ',' << c.priority << ',' << w.window << ','
            << w.arrived << ',' << csvNumber(w.queueMs.p50) << ',' << csvNumber(w.queueMs.p95)
            << ',' << csvNumber(w.queueMs.p99) << ',' << csvNumber(w.ttftMs.p50) << ','
            << csvNumber(w.ttftMs.p95) << ',' << csvNumber(w.ttftMs.p99) << ','
            << csvNumber(w.completedPerSecond) << ',' << csvNumber(w.outputTokensPerSecond) << ','
            << c.rejected << ',' << c.evicted << ',' << c.unfinished << ',' << csvNumber(hol) << ','
            << c.revoked << ',' << c.wastedTokens << ',' << c.repaidPrefillTokens << ','
            << c.generatedTokens << '\n';
      }
    }
  }
  return out.str();
}

std::string gnuplotScript(const Scenario& scenario, const std::vector<ArmResult>& arms) {
  std::ostringstream g;
  g << "# Generated by `holdback simulate --plot`; run with `gnuplot simulation.gp` in this\n"
       "# directory (Debian: apt-get install gnuplot-nox).\n"
       "set datafile separator ','\n"
       "set terminal pngcairo size 1000,600 noenhanced\n"
       "set key outside right\n"
       "set grid\n";
  for (const DetectorKind d : {DetectorKind::kUtilization, DetectorKind::kConcurrency}) {
    std::string list;
    for (const ArmResult& a : arms) {
      if (a.detector == d) list += (list.empty() ? "" : " ") + a.arm.name;
    }
    if (list.empty()) continue;
    const std::string_view name = toString(d);
    g << "arms = \"" << list << "\"\n";
    // intervals.csv: arm, time, saturation, then (ceiling, queued) per class.
    g << "set output 'saturation-" << name << ".png'\n"
      << "set title 'Pool saturation, " << name << " detector'\n"
      << "set xlabel 'time (s)'\nset ylabel 'saturation'\n"
      << "plot for [a in arms] 'intervals.csv' using (strcol(1) eq a ? $2 : NaN):3 "
         "with lines title a\n";
    // ttft-cdf.csv: arm, class, ttft_ms, fraction (sorted per arm and class).
    g << "set logscale x\nset xlabel 'TTFT (ms)'\nset ylabel 'fraction of requests'\n";
    for (const TrafficClass& c : scenario.classes) {
      g << "set output 'ttft-cdf-" << name << "-" << c.name << ".png'\n"
        << "set title 'TTFT CDF, class " << c.name << ", " << name
        << " detector (requests served)'\n"
        << "plot for [a in arms] 'ttft-cdf.csv' using (strcol(1) eq a && strcol(2) eq '" << c.name
        << "' ? $3 : NaN):4 with lines lw 2 title a\n";
    }
    g << "unset logscale x\n";
  }
  g << "set xlabel 'time (s)'\n";
  for (const ArmResult& a : arms) {
    if (!a.arm.flowControl) continue;
    g << "set terminal pngcairo size 1000,800 noenhanced\n"
      << "set output 'bands-" << a.arm.name << ".png'\n"
      << "set multiplot layout 4,1 title 'arm " << a.arm.name << "'\n"
      << "set title 'ceiling per band, and saturation'\nset ylabel 'ceiling'\n"
      << "set yrange [0:1.05]\n"
      << "plot 'intervals.csv' using (strcol(1) eq '" << a.arm.name
      << "' ? $2 : NaN):3 with lines lc 'black' title 'saturation'";
    for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
      g << ", '' using (strcol(1) eq '" << a.arm.name << "' ? $2 : NaN):" << 4 + 2 * c
        << " with lines lw 2 title '" << scenario.classes[c].name << " (p"
        << scenario.classes[c].priority << ")'";
    }
    g << "\nset title 'gateway queue depth per band'\nset ylabel 'requests'\n"
      << "set yrange [0:*]\nplot ";
    for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
      g << (c ? ", " : "") << "'intervals.csv' using (strcol(1) eq '" << a.arm.name
        << "' ? $2 : NaN):" << 5 + 2 * c << " with lines lw 2 title '" << scenario.classes[c].name
        << "'";
    }
    const std::size_t reserveColumn = 6 + 2 * scenario.classes.size();
    g << "\nset title 'reserve kept below each band ((1 - ceiling) x slots)'\n"
      << "set ylabel 'requests'\nplot ";
    for (std::size_t c = 0; c < scenario.classes.size(); ++c) {
      g << (c ? ", " : "") << "'intervals.csv' using (strcol(1) eq '" << a.arm.name
        << "' ? $2 : NaN):" << reserveColumn + c << " with lines lw 2 title '"
        << scenario.classes[c].name << "'";
    }
    // The pool's real free room in both resources: free slots (left axis) and free KV tokens
    // (right axis); with KV-bound traffic the second runs out first.
    const std::size_t freeColumn = reserveColumn + scenario.classes.size();
    g << "\nset title 'free room of the pool: slots and KV tokens'\n"
      << "set ylabel 'slots'\nset y2label 'KV tokens'\nset y2tics\nset y2range [0:*]\n"
      << "plot 'intervals.csv' using (strcol(1) eq '" << a.arm.name
      << "' ? $2 : NaN):" << freeColumn
      << " with lines lw 2 title 'free slots', '' using (strcol(1) eq '" << a.arm.name
      << "' ? $2 : NaN):" << freeColumn + 1 << " axes x1y2 with lines lw 2 title 'free KV tokens'";
    g << "\nunset y2tics\nunset y2label\nset y2range [*:*]\nunset multiplot\nset yrange [*:*]\n"
      << "set terminal pngcairo size 1000,600 noenhanced\n";
  }
  g << "set output\n";
  return g.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
