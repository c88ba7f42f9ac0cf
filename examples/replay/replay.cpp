// holdback-replay: plays a simulator scenario on real processes and prints the simulator's report
// (docs/guide/replay.md).
//
//   holdback-replay [--scenario NAME|FILE] [--seed N | --seeds LIST] [--arms A,B,...]
//                   [--format table|json] [--detail] [--gateway PATH] [--model-server PATH]
//                   [--work-dir DIR]
//
// The algorithm
//   Per seed, the simulator first runs the scenario with the arm "none" to fix the traffic: the
//   open-loop classes' arrival times and lengths (the same for every arm, as in the simulator),
//   and for a closed-loop backlog class its initial ramp and the lengths of the requests it sends
//   in order. Then every arm, and every class alone (the unloaded baseline, behind a static-1.0
//   gateway that an unloaded pool never saturates), runs at once on its own processes:
//   pool.endpoints fake model servers in pool mode with the scenario's pool parameters, and one
//   holdback-gateway with the arm's configuration (the arm's policy and eviction, the scenario's
//   detector, one priority band per class, --objective CLASS=PRIORITY). Each request is an HTTP
//   streaming completion through the gateway with header x-gateway-inference-objective: CLASS;
//   TTFT is arrival to the first token event. A backlog class sends its next request when one
//   ends, until the measured duration; a stream the gateway ends with an error event (in-flight
//   eviction) is sent again, as the simulator's clients do. After duration + drain seconds every
//   request still open is unfinished. The records are measured by the simulator's code
//   (measureRecords) and aggregated by summarizeRuns, so the report is the simulator's, with
//   "mode": "replay" in JSON.
//
// Thread safety: a program; one thread drives every client coroutine.
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "holdback/config/document.hpp"
#include "run_plan.hpp"
#include "sim/evaluate.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using holdback::config::Json;
using namespace holdback::sim;
using namespace holdback::replay;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: holdback-replay [--scenario NAME|FILE] [--seed N | --seeds LIST] [--arms A,B,...]\n"
    "                       [--format table|json] [--detail] [--gateway PATH]\n"
    "                       [--model-server PATH] [--work-dir DIR]\n"
    "Plays a simulator scenario (default: replay-small) in real time on fake model servers in\n"
    "pool mode behind one holdback-gateway per arm (default arms: static-1.0,recommended) and\n"
    "prints the report of `holdback simulate` for it (JSON: the same schema plus\n"
    "\"mode\": \"replay\"). Arms, seeds and the unloaded baselines run as in the simulator; the\n"
    "arms and baselines of one seed run at the same time on their own processes.\n"
    "--gateway / --model-server: the programs (default: beside this one in the build tree).\n"
    "--work-dir: where the gateway configs and the processes' logs go (default: a new temporary\n"
    "directory).\n";

std::string fmt(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// One arm (or one class's baseline) on its own servers and gateway.
struct Run {
  std::string label;
  Arm arm;
  std::vector<ClassPlan> plan;
  std::vector<std::unique_ptr<holdback_e2e::ChildProcess>> servers;
  std::unique_ptr<holdback_e2e::ChildProcess> gateway;
  tcp::endpoint target;
  std::deque<RequestRecord> records;
};

struct Player {
  const Scenario& s;
  asio::io_context& io;
  Clock::time_point t0;

  double now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  void send(Run& run, std::uint32_t cls, std::int64_t input, std::int64_t output, double arrival,
            std::int64_t retryOf) {
    RequestRecord& r = run.records.emplace_back();
    r.classIndex = cls;
    r.inputTokens = input;
    r.outputTokens = output;
    r.arrival = arrival;
    r.retryOf = retryOf;
    r.outcome = "unfinished";
    asio::co_spawn(io, play(run, run.records.size() - 1), asio::detached);
  }

  // A backlog class keeps its requests outstanding: one ends, the next goes (until the end).
  void replace(Run& run, std::uint32_t cls) {
    ClassPlan& p = run.plan[cls];
    if (!p.backlog || p.requests.empty() || now() >= s.durationSeconds) return;
    const PlannedRequest& q = p.requests[p.next++ % p.requests.size()];
    send(run, cls, q.input, q.output, now(), -1);
  }

  asio::awaitable<void> play(Run& run, std::size_t index) {
    RequestRecord& r = run.records[index];
    const std::string& name = s.classes[r.classIndex].name;
    std::string prompt;
    for (std::int64_t i = 0; i < r.inputTokens; ++i) prompt += i == 0 ? "x" : " x";
    const std::string body = Json{
        {"model", "fake-model"},
        {"prompt", prompt},
        {"max_tokens", r.outputTokens},
        {"stream", true}}.dump();
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: replay\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
        "x-gateway-inference-objective: " +
        name + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    constexpr auto kUse = asio::as_tuple(asio::use_awaitable);
    tcp::socket socket(io);
    auto [cec] = co_await socket.async_connect(run.target, kUse);
    if (cec) co_return;  // unfinished
    const std::string wire = head + body;
    auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(wire), kUse);
    if (wec) co_return;
    std::string in;
    char buf[8192];
    std::size_t scanned = 0;
    int status = 0;
    bool done = false;
    bool error = false;
    for (;;) {
      auto [rec, n] = co_await socket.async_read_some(asio::buffer(buf), kUse);
      if (rec) break;
      in.append(buf, n);
      if (status == 0) {
        const auto end = in.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        status = std::atoi(in.c_str() + in.find(' ') + 1);
        scanned = end + 4;
        if (status != 200) break;
      }
      for (std::size_t at; (at = in.find("data: ", scanned)) != std::string::npos;) {
        const auto eol = in.find('\n', at);
        if (eol == std::string::npos) break;
        const std::string_view event(in.data() + at + 6, eol - at - 6);
        if (event.starts_with("[DONE]")) {
          done = true;
        } else if (event.find("\"error\"") != std::string_view::npos) {
          error = true;
        } else if (std::isnan(r.firstToken)) {
          r.firstToken = now();
        }
        scanned = eol + 1;
      }
      if (done || error) break;
    }
    RequestRecord& rec = run.records[index];
    rec.dispatched = rec.arrival;  // not observable from outside the gateway
    if (status != 0 && status != 200) {
      rec.outcome = "rejected";
      rec.dispatched = std::numeric_limits<double>::quiet_NaN();
    } else if (done) {
      rec.outcome = "completed";
      rec.finished = now();
    } else if (error) {
      rec.outcome = "revoked";
      rec.finished = now();
      rec.firstToken = std::numeric_limits<double>::quiet_NaN();
      if (now() < s.durationSeconds + s.drainSeconds) {
        send(run, rec.classIndex, rec.inputTokens, rec.outputTokens, now(),
             static_cast<std::int64_t>(index));
      }
      co_return;
    } else {
      co_return;  // the connection broke: unfinished
    }
    replace(run, rec.classIndex);
  }

  asio::awaitable<void> arrivals(Run& run, std::uint32_t cls) {
    ClassPlan& p = run.plan[cls];
    asio::steady_timer timer(io);
    const std::size_t timed =
        p.backlog ? std::min(p.backlogSize, p.requests.size()) : p.requests.size();
    for (std::size_t i = 0; i < timed; ++i) {
      const PlannedRequest& q = p.requests[i];
      timer.expires_at(t0 + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(q.arrival)));
      (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      send(run, cls, q.input, q.output, q.arrival, -1);
    }
    p.next = timed;
  }
};

std::string selfDir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

bool startRun(Run& run, const Scenario& s, const std::string& dir, const std::string& serverBin,
              const std::string& gatewayBin) {
  const PoolSpec& p = s.pool;
  std::vector<std::string> gatewayArgs = {gatewayBin};
  const std::vector<EndpointGroup> specs = p.endpointSpecs();  // mixed pools: each its group's
  for (std::size_t e = 0; e < specs.size(); ++e) {
    const EndpointGroup& g = specs[e];
    run.servers.push_back(std::make_unique<holdback_e2e::ChildProcess>(
        run.label + "-server-" + std::to_string(e),
        std::vector<std::string>{
            serverBin, "--slots", std::to_string(g.slots), "--kv-capacity-tokens",
            std::to_string(g.kvCapacityTokens), "--prefill-base-ms", fmt(g.timing.prefillBaseMs),
            "--prefill-per-token-ms", fmt(g.timing.prefillPerTokenMs), "--tpot-base-ms",
            fmt(g.timing.tpotBaseMs), "--tpot-per-running-ms", fmt(g.timing.tpotPerRunningMs)},
        dir));
    if (!run.servers.back()->startedOk()) {
      std::cerr << "holdback-replay: " << run.label
                << ": model server: " << run.servers.back()->error() << "\n";
      return false;
    }
    const std::string url = run.servers.back()->url(), slots = ",slots=" + std::to_string(g.slots);
    gatewayArgs.insert(gatewayArgs.end(), {"--endpoint", p.groups.empty() ? url : url + slots});
  }
  const std::string config = dir + "/" + run.label + ".json";
  std::ofstream(config) << gatewayConfig(s, run.arm).dump(2) << "\n";
  gatewayArgs.insert(gatewayArgs.end(), {"--config", config, "--scrape-interval-ms",
                                         std::to_string(std::lround(p.scrapeIntervalMs))});
  for (const TrafficClass& c : s.classes) {
    gatewayArgs.insert(gatewayArgs.end(),
                       {"--objective", c.name + "=" + std::to_string(c.priority)});
  }
  run.gateway =
      std::make_unique<holdback_e2e::ChildProcess>(run.label + "-gateway", gatewayArgs, dir);
  if (!run.gateway->startedOk()) {
    std::cerr << "holdback-replay: " << run.label << ": gateway: " << run.gateway->error() << "\n"
              << run.gateway->stderrTail() << "\n";
    return false;
  }
  run.target = tcp::endpoint(asio::ip::make_address(run.gateway->host()),
                             static_cast<unsigned short>(run.gateway->port()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenarioName = "replay-small";
  std::string seedsText;
  std::string armsText = "static-1.0,recommended";
  std::string format = "table";
  bool detail = false;
  std::string serverBin = selfDir() + "/../model-server/holdback-model-server";
  std::string gatewayBin = selfDir() + "/../gateway/holdback-gateway";
  std::string workDir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--detail") {
      detail = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "holdback-replay: %s needs a value\n%s", arg.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    if (arg == "--scenario") {
      scenarioName = v;
    } else if (arg == "--seed" || arg == "--seeds") {
      seedsText = v;
    } else if (arg == "--arms") {
      armsText = v;
    } else if (arg == "--format") {
      format = v;
      if (format != "table" && format != "json") {
        std::fprintf(stderr, "holdback-replay: --format \"%s\": table or json\n", v.c_str());
        return 2;
      }
    } else if (arg == "--gateway") {
      gatewayBin = v;
    } else if (arg == "--model-server") {
      serverBin = v;
    } else if (arg == "--work-dir") {
      workDir = v;
    } else {
      std::fprintf(stderr, "holdback-replay: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }

  Scenario scenario;
  if (!findScenario(scenarioName, scenario)) {
    auto doc = holdback::config::parseDocumentFile(scenarioName);
    if (!doc.ok()) {
      std::fprintf(stderr, "holdback-replay: --scenario \"%s\": not a built-in scenario, and %s\n",
                   scenarioName.c_str(), doc.diagnostics().toString().c_str());
      return 2;
    }
    // A relative trace file is relative to the scenario file (docs/guide/traces.md).
    auto parsed =
        parseScenario(doc.value().json, std::filesystem::path(scenarioName).parent_path().string());
    if (!parsed.ok()) {
      std::fprintf(stderr, "holdback-replay: %s: %s\n", scenarioName.c_str(),
                   parsed.diagnostics().toString().c_str());
      return 1;
    }
    scenario = std::move(parsed).value();
    scenario.name = scenarioName;
  }
  EvaluationOptions options;
  options.detectors = {scenario.detector};
  options.seeds = {scenario.seed};
  if (!seedsText.empty()) {
    std::string error;
    auto seeds = parseSeeds(seedsText, error);
    if (!seeds) {
      std::fprintf(stderr, "holdback-replay: %s\n", error.c_str());
      return 2;
    }
    options.seeds = *seeds;
  }
  options.arms.clear();
  for (std::size_t start = 0; start <= armsText.size();) {
    const std::size_t comma = std::min(armsText.find(',', start), armsText.size());
    const std::string name = armsText.substr(start, comma - start);
    Arm arm;
    if (!findArm(name, arm) || !arm.flowControl) {
      std::fprintf(stderr, "holdback-replay: --arms: \"%s\" is not an arm with flow control (%s)\n",
                   name.c_str(), armNames().c_str());
      return 2;
    }
    if (engineSchedulingOf(scenario, arm) != EngineScheduling::kFcfs) {  // the fake server is FCFS
      std::fprintf(stderr,
                   "holdback-replay: --arms: \"%s\" runs on servers that schedule by priority "
                   "(pool.engineScheduling); the fake model server is FCFS\n",
                   name.c_str());
      return 2;
    }
    options.arms.push_back(arm);
    start = comma + 1;
  }
  if (workDir.empty()) {
    char tmpl[] = "/tmp/holdback-replay-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::perror("holdback-replay: mkdtemp");
      return 1;
    }
    workDir = tmpl;
  }
  std::filesystem::create_directories(workDir);
  Arm reference;
  (void)findArm("static-1.0", reference);
  bool hasReference = false;
  for (const Arm& a : options.arms) hasReference = hasReference || a.name == reference.name;

  const std::size_t nc = scenario.classes.size();
  std::vector<ArmResult> arms, baselines, references;
  std::size_t runs = 0;
  const auto started = Clock::now();
  for (const std::uint64_t seed : options.seeds) {
    Scenario s = scenario;
    s.seed = seed;
    std::vector<std::unique_ptr<Run>> all;
    const auto full = planTraffic(s, -1);
    for (const Arm& a : options.arms) {
      all.push_back(std::make_unique<Run>(Run{.label = a.name, .arm = a, .plan = full}));
    }
    if (!hasReference) {
      all.push_back(std::make_unique<Run>(
          Run{.label = "reference-static-1.0", .arm = reference, .plan = full}));
    }
    for (std::size_t c = 0; c < nc; ++c) {
      all.push_back(std::make_unique<Run>(Run{.label = "unloaded-" + s.classes[c].name,
                                              .arm = reference,
                                              .plan = planTraffic(s, static_cast<int>(c))}));
    }
    for (auto& run : all) {
      run->label += "-seed" + std::to_string(seed);
      if (!startRun(*run, s, workDir, serverBin, gatewayBin)) return 1;
    }
    std::fprintf(stderr, "holdback-replay: seed %llu: %zu runs on %zu processes for %.0f s\n",
                 static_cast<unsigned long long>(seed), all.size(),
                 all.size() * static_cast<std::size_t>(s.pool.endpoints + 1),
                 s.durationSeconds + s.drainSeconds);
    asio::io_context io(1);
    Player player{s, io, Clock::now() + std::chrono::milliseconds(200)};
    for (auto& run : all) {
      for (std::uint32_t c = 0; c < nc; ++c) {
        asio::co_spawn(io, player.arrivals(*run, c), asio::detached);
      }
    }
    io.run_until(player.t0 +
                 std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(s.durationSeconds + s.drainSeconds)));
    io.stop();
    runs += all.size();
    std::size_t k = 0;
    for (std::size_t a = 0; a < options.arms.size(); ++a, ++k) {
      const std::vector<RequestRecord> records(all[k]->records.begin(), all[k]->records.end());
      arms.push_back(measureRecords(s, all[k]->arm, records));
    }
    if (!hasReference) {
      const std::vector<RequestRecord> records(all[k]->records.begin(), all[k]->records.end());
      references.push_back(measureRecords(s, all[k]->arm, records));
      ++k;
    } else {
      references.emplace_back();
    }
    for (std::size_t c = 0; c < nc; ++c, ++k) {
      const std::vector<RequestRecord> records(all[k]->records.begin(), all[k]->records.end());
      baselines.push_back(measureRecords(s, all[k]->arm, records));
    }
    // The runs' processes stop here (SIGTERM, then SIGKILL after a grace period).
  }
  Evaluation evaluation = summarizeRuns(scenario, options, arms, baselines, references);
  evaluation.mode = "replay";
  evaluation.runs = runs;
  if (format == "json") {
    std::cout << formatJson(evaluation) << "\n";
    return 0;
  }
  std::cout << "replay of " << scenario.name << " on real processes (holdback-model-server in pool "
            << "mode, holdback-gateway per arm)\n";
  std::cout << formatOverview(evaluation);
  if (detail) {
    std::cout << "\n" << formatSummary(evaluation);
    // The first seed's arms in full, as `holdback simulate --detail` prints them.
    std::cout << "\n" << formatTable(evaluation.scenario, evaluation.reports.front().firstSeed);
  }
  std::fprintf(stderr, "holdback-replay: %zu runs in %.0f s; configs and logs in %s\n", runs,
               std::chrono::duration<double>(Clock::now() - started).count(), workDir.c_str());
  return 0;
}
