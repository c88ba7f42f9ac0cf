// holdback simulate: the discrete-event simulation of a gateway and a pool of LLM servers, driving
// the real FlowController, policies and detectors (src/sim/simulator.hpp).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "sim/evaluate.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kSimulateHelp =
    R"(Usage: holdback simulate [--scenario NAME|FILE] [--seed N | --seeds LIST] [--duration SECONDS]
                         [--arms A,B,...] [--detector utilization|concurrency|both]
                         [--replicas R] [--jobs N] [--format table|json] [--detail]
                         [--csv DIR] [--plot DIR]

Simulates a gateway in front of a pool of LLM servers (continuous batching, server-side FCFS
queues, telemetry scraped every 50 ms) under prioritized traffic, once per arm, seed and
detector on the same traffic. By default it prints one compact summary per detector: the
recommended arm against none, static-1.0 and the best other arm, with the top class's time to
first token p99 as a multiple of the same arrivals alone on the empty pool (the unloaded baseline)
per window, the lowest class's goodput as a % of static-1.0 and the requests evicted. --detail
prints every arm in full: per class the gateway queueing delay and time to first token
(p50/p95/p99, in burst, onset, idle and all windows), goodput (completions/s and output tokens/s),
rejected/evicted counts and the signal health (saturation, server queues, dispatches per scrape
interval). See docs/simulation.md.

Options:
  --scenario S      a built-in scenario (default, burst-after-idle, short-bursts, kv-bound,
                    replay-small, azure-code, azure-conv: real traces, docs/guide/traces.md;
                    mixed-pool: endpoints of two sizes) or a scenario document, JSON or YAML
                    (keys in docs/simulation.md); default: default
  --seed N          one random seed (default: the scenario's, 1); same seed, same table
  --seeds LIST      several seeds, "1,2,7" or "1-5" (at most 1000): every arm runs on every seed;
                    the report gives the mean over seeds and its min-max
  --duration S      measured seconds (default: the scenario's)
  --arms LIST       comma-separated arms (default: all): none, static-1.0, stepwise, linear,
                    sigmoid, static-map, soft-reflective, stepwise-active (stepwise over the
                    priorities active within the last second only), reservation and
                    reservation-0.1% (reservation-holdback-policy, epsilon 1 % / 0.1 %);
                    static-1.0+evict, stepwise+evict, reservation+evict-hol add in-flight
                    eviction at a head-of-line block (upstream's trigger); reservation+evict
                    restores the reserve by eviction before a block instead. Only when named:
                    oracle, a simulator-only bound that knows the top class's future arrivals
                    (docs/simulation.md); recommended-hol (recommended, eviction at a
                    head-of-line block instead of reserve restoration); recommended-rise
                    (restoration only in a protected burst, the head-of-line trigger
                    otherwise); none+engine, static-1.0+engine, recommended+engine,
                    recommended-noevict+engine (servers preempting by priority) and
                    none+engine-queue, static-1.0+engine-queue (servers ordering by priority),
                    engine-headroom, none+engine-routed, engine-headroom-routed
                    (docs/results/engine-priority.md); gateway-default (holdback-gateway's
                    built-in configuration, docs/guide/gateway.md)
  --detector D      the saturation detector of the gateway: utilization (scraped queue and KV
                    telemetry), concurrency (the gateway's own in-flight counts) or both, one
                    table each (default: both for a built-in scenario, else the scenario's)
  --replicas R      gateway replicas (pool.gatewayReplicas, 1-64): each has its own controller
                    and in-flight counts, all read the same scraped telemetry
  --scrape-ms MS    the scrape interval (pool.scrapeIntervalMs, default 50)
  --sync-ms MS      replicas share their pending dispatches every MS ms (replica sync,
                    pool.replicaSyncIntervalMs; default off: each counts its own R times)
  --feed-ms MS      with --sync-ms: the replica feed, each replica's dispatches, completions and
                    arrivals reach the others MS ms later, and each scrapes on its own timer
                    (pool.replicaFeed, pool.replicaFeedDelayMs; default off)
  --oldest-first on|off
                    with the feed: a replica leaves a dispatch to another whose head of the same
                    band waited longer (pool.replicaOldestFirst; default on, as the gateway)
  --replica-mode share|reserve
                    share (default): the above. reserve: every dispatch books one slot and its
                    KV tokens on its endpoint in a table the replicas share and starts once
                    booked; refused, it waits at its replica (pool.replicaMode). Runs on sync
                    and the feed as the gateway does: --sync-ms 20 unless given, the feed on
  --replica-rtt-ms MS
                    reserve mode: the round trip of one reservation (pool.replicaReserveRttMs,
                    default 0.2, a Redis on the same host)
  --revocation-ms MS
                    in-flight eviction arms (*+evict): from the controller's revocation to the
                    victim's slot being free (pool.revocationLatencyMs, default 50)
  --burst-memory S  reservation+evict: reserve restoration remembers the highest arrival rate
                    of the protected classes with this time constant in seconds
                    (restoreBurstMemorySeconds; EvictionOptions::restoreReserve.burstMemory;
                    default 0 = off)
  --eviction-budget B[,BURST]
                    arms with reserve restoration: at most B revocations per protected request
                    started, BURST saved up (restoreReserve.evictionBudget, evictionBurst; 0 =
                    none; default: the arm's, none for every arm;
                    docs/guide/eviction.md, "Restoration budgets")
  --waste-budget W[,S]
                    arms with reserve restoration: revoked slot time at most W of the sheddable
                    classes' completed slot time, S seconds saved up (restoreReserve.wasteBudget,
                    wasteBurst; 0 = none; default: the arm's, none for every arm)
  --revoke-on-block on|off
                    arms with reserve restoration: upstream's head-of-line trigger as well
                    (eviction.revokeOnBlock; default: the arm's, off for recommended)
  --burst-significance Z
                    arms with reserve restoration: restore only in a burst of the protected
                    classes, Z standard deviations (restoreReserve.burstSignificance; 0 = at any
                    time; default: the arm's, 3 for recommended-rise, else 0)
  --ledger on|off   utilization detector: each replica fills its view through its own
                    DispatchLedger (pool.dispatchLedger; default on, the scenario's value)
  --ledger-budget on|off
                    the ledger's per-scrape dispatch budget (pool.ledgerBudget)
  --ledger-credit on|off
                    the ledger credits completions of requests the last scrape showed at once
                    (pool.ledgerCreditCompletions; default off, on in reserve mode)
  --lost-completions F
                    fault: fraction F of completions never reported to the ledger
                    (pool.lostCompletions)
  --slot-term on|off
                    utilization detector: the slot term, maxRunningRequests = slots
                    (pool.slotTerm; default on: the pool's slots are configuration)
  --concurrency-mode requests|tokens|hybrid
                    concurrency detector: what it counts (pool.concurrencyMode): in-flight
                    requests against the slots (default), in-flight tokens (input + output)
                    against kvCapacityTokens, or per endpoint the larger of the two
  --engine-scheduling fcfs|priority|priority-preempt
                    the servers' own scheduling (pool.engineScheduling): FCFS (default); their
                    queue by the priority the gateway sends; or that and preemption of a lower
                    priority running request, which recomputes its tokens later
  --jobs N          threads (default: the machine's cores); the results do not depend on it
  --format F        table (default) or json (one JSON document on stdout; schema in
                    docs/simulation.md)
  --detail          table format: every arm's full tables (with one seed, each run's table per
                    class and window; then the tables over seeds), before the summary
  --csv DIR         write summary.csv, requests.csv (one row per request), intervals.csv
                    (saturation, ceilings and queue depths every 100 ms), ttft-cdf.csv (all of
                    the first seed) and pareto.csv (over all seeds) into DIR
  --plot DIR        as --csv, plus simulation.gp and pareto.gp, rendered with gnuplot when it is
                    installed (Debian package gnuplot-nox; scripts/run.sh installs it for --plot)
  --help            this text

Progress goes to stderr. Exit codes: 0 success, 1 invalid scenario file, 2 usage error (or
gnuplot failed).
)";

bool writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

int runSimulate(int argc, char** argv) {
  constexpr std::string_view kCommand = "simulate";
  Args args;
  // clang-format off
  const std::vector<std::string> options = {
      "scenario", "seed", "seeds", "duration", "arms", "detector", "replicas", "jobs", "format",
      "csv", "plot", "scrape-ms", "revocation-ms", "burst-memory", "ledger", "ledger-budget",
      "ledger-credit", "lost-completions", "slot-term", "concurrency-mode", "sync-ms", "feed-ms",
      "oldest-first", "replica-mode", "replica-rtt-ms", "engine-scheduling", "eviction-budget",
      "waste-budget", "revoke-on-block", "burst-significance"};
  // clang-format on
  if (auto error = parseArgs(argc, argv, 2, options, args, {"detail"})) {
    return usageError(kCommand, *error);
  }
  if (args.help) {
    std::cout << kSimulateHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return usageError(kCommand, "unexpected argument \"" + args.positional.front() + "\"");
  }

  sim::Scenario scenario = sim::defaultScenario();
  std::vector<sim::DetectorKind> detectors{sim::DetectorKind::kUtilization,
                                           sim::DetectorKind::kConcurrency};
  std::string builtinError;
  if (auto name = args.get("scenario"); name && !sim::findScenario(*name, scenario, builtinError)) {
    const std::string& file = *name;
    if (!builtinError.empty())
      return usageError(kCommand, "--scenario " + file + ": " + builtinError);
    if (!std::filesystem::exists(file)) {
      std::string known;
      for (const sim::CatalogEntry& e : sim::scenarioCatalog()) {
        known += (known.empty() ? "" : ", ") + std::string(e.name);
      }
      return usageError(kCommand, "--scenario \"" + file + "\" is neither a built-in scenario (" +
                                      known + ") nor a file");
    }
    Diagnostics diagnostics;
    int exitCode = kExitOk;
    auto json = loadConfigFile(kCommand, file, diagnostics, exitCode);
    if (!json) return exitCode;
    auto parsed = sim::parseScenario(*json, std::filesystem::path(file).parent_path().string());
    diagnostics.append(parsed.diagnostics());
    printDiagnostics(file, diagnostics);
    if (!parsed.ok() || diagnostics.hasErrors()) return kExitInvalid;
    scenario = std::move(parsed).value();
    scenario.name = file;
    detectors = {scenario.detector};
  }
  if (auto detector = args.get("detector")) {
    if (*detector == "utilization") {
      detectors = {sim::DetectorKind::kUtilization};
    } else if (*detector == "concurrency") {
      detectors = {sim::DetectorKind::kConcurrency};
    } else if (*detector == "both") {
      detectors = {sim::DetectorKind::kUtilization, sim::DetectorKind::kConcurrency};
    } else {
      return usageError(kCommand, "--detector must be utilization, concurrency or both");
    }
  }
  std::vector<std::uint64_t> seeds;
  if (args.get("seed") && args.get("seeds")) {
    return usageError(kCommand, "give --seed or --seeds, not both");
  }
  if (auto seed = args.get("seed")) {
    const auto v = parseDouble(*seed);
    if (!v || !(*v >= 0.0 && *v < 9e18) ||
        *v != static_cast<double>(static_cast<std::int64_t>(*v))) {
      return usageError(kCommand, "--seed needs a non-negative integer");
    }
    scenario.seed = static_cast<std::uint64_t>(*v);
  }
  if (auto list = args.get("seeds")) {
    std::string error;
    auto parsed = sim::parseSeeds(*list, error);
    if (!parsed) return usageError(kCommand, error);
    seeds = std::move(*parsed);
    scenario.seed = seeds.front();
  } else {
    seeds = {scenario.seed};
  }
  if (auto duration = args.get("duration")) {
    const auto v = parseDouble(*duration);
    if (!v || !(*v > 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--duration needs a number of seconds in (0, 1e6]");
    }
    scenario.durationSeconds = *v;
    if (std::string error = sim::scenarioSizeError(scenario); !error.empty()) {
      return usageError(kCommand, "--duration " + *duration + ": " + error);
    }
  }
  if (auto replicas = args.get("replicas")) {
    const auto v = parseDouble(*replicas);
    if (!v || !(*v >= 1.0 && *v <= 64.0) || *v != static_cast<double>(static_cast<int>(*v))) {
      return usageError(kCommand, "--replicas needs an integer in [1, 64]");
    }
    scenario.pool.gatewayReplicas = static_cast<int>(*v);
  }
  if (auto ms = args.get("sync-ms")) {
    const auto v = parseDouble(*ms);
    if (!v || !(*v > 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--sync-ms needs a number of milliseconds in (0, 1e6]");
    }
    scenario.pool.replicaSyncIntervalMs = *v;
  }
  if (auto ms = args.get("feed-ms")) {
    const auto v = parseDouble(*ms);
    if (!v || !(*v >= 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--feed-ms needs a number of milliseconds in [0, 1e6]");
    }
    scenario.pool.replicaFeed = true;
    scenario.pool.replicaFeedDelayMs = *v;
  }
  if (auto mode = args.get("replica-mode")) {
    if (*mode != "share" && *mode != "reserve") {
      return usageError(kCommand, "--replica-mode " + *mode + ": must be share or reserve");
    }
    scenario.pool.replicaMode =
        *mode == "reserve" ? sim::ReplicaMode::kReserve : sim::ReplicaMode::kShare;
  }
  if (auto ms = args.get("replica-rtt-ms")) {
    const auto v = parseDouble(*ms);
    if (!v || !(*v >= 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--replica-rtt-ms needs a number of milliseconds in [0, 1e6]");
    }
    scenario.pool.replicaReserveRttMs = *v;
  }
  sim::applyReplicaModeDefaults(scenario.pool);  // reserve: the gateway's sync and feed
  if (scenario.pool.replicaFeed && !(scenario.pool.replicaSyncIntervalMs > 0.0)) {
    return usageError(kCommand,
                      "--feed-ms (pool.replicaFeed) needs replica sync (--sync-ms): the replicas "
                      "exchange their restoration figures and ranks through it");
  }
  if (auto ms = args.get("scrape-ms")) {
    const auto v = parseDouble(*ms);
    if (!v || !(*v > 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--scrape-ms needs a number of milliseconds in (0, 1e6]");
    }
    scenario.pool.scrapeIntervalMs = *v;
  }
  for (const auto& [flag, field] :
       {std::pair{"ledger", &scenario.pool.dispatchLedger},
        std::pair{"ledger-budget", &scenario.pool.ledgerBudget},
        std::pair{"ledger-credit", &scenario.pool.ledgerCreditCompletions},
        std::pair{"slot-term", &scenario.pool.slotTerm},
        std::pair{"oldest-first", &scenario.pool.replicaOldestFirst}}) {
    if (auto v = args.get(flag)) {
      if (*v != "on" && *v != "off") {
        return usageError(kCommand, std::string("--") + flag + " must be on or off");
      }
      *field = *v == "on";
    }
  }
  if (auto mode = args.get("concurrency-mode")) {
    if (*mode == "requests") {
      scenario.pool.concurrencyMode = sim::CountedResource::kRequests;
    } else if (*mode == "tokens") {
      scenario.pool.concurrencyMode = sim::CountedResource::kTokens;
    } else if (*mode == "hybrid") {
      scenario.pool.concurrencyMode = sim::CountedResource::kHybrid;
    } else {
      return usageError(kCommand, "--concurrency-mode must be requests, tokens or hybrid");
    }
  }
  if (auto mode = args.get("engine-scheduling")) {
    if (!sim::parseEngineScheduling(*mode, scenario.pool.engineScheduling)) {
      return usageError(kCommand, "--engine-scheduling must be fcfs, priority or priority-preempt");
    }
    if (scenario.pool.engineScheduling == sim::EngineScheduling::kPriorityPreempt &&
        scenario.pool.service != sim::ServiceModel::kTokens) {
      return usageError(kCommand, "--engine-scheduling priority-preempt needs service: tokens");
    }
  }
  if (auto ms = args.get("revocation-ms")) {
    const auto v = parseDouble(*ms);
    if (!v || !(*v >= 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--revocation-ms needs a number of milliseconds in [0, 1e6]");
    }
    scenario.pool.revocationLatencyMs = *v;
  }
  if (auto memory = args.get("burst-memory")) {
    const auto v = parseDouble(*memory);
    if (!v || !(*v >= 0.0 && *v <= 1e6)) {
      return usageError(kCommand, "--burst-memory needs a number of seconds in [0, 1e6]");
    }
    scenario.restoreBurstMemorySeconds = *v;
  }
  // RATE[,BURST]: a budget of reserve restoration and its bucket.
  auto budget = [](std::string_view text, double maxRate, double& rate, double& burst) {
    const std::size_t comma = text.find(',');
    const auto r = parseDouble(text.substr(0, comma));
    if (!r || !(*r >= 0.0 && *r <= maxRate)) return false;
    rate = *r;
    if (comma == std::string_view::npos) return true;
    const auto b = parseDouble(text.substr(comma + 1));
    if (!b || !(*b > 0.0 && *b <= 1000.0)) return false;
    burst = *b;
    return true;
  };
  if (auto b = args.get("eviction-budget")) {
    if (!budget(*b, 1.0, scenario.restoreEvictionBudget, scenario.restoreEvictionBurst) ||
        (scenario.restoreEvictionBurst >= 0.0 && scenario.restoreEvictionBurst < 1.0)) {
      return usageError(kCommand,
                        "--eviction-budget needs B[,BURST]: B in [0, 1], BURST in [1, 1000]");
    }
  }
  if (auto w = args.get("waste-budget")) {
    if (!budget(*w, 0.999, scenario.restoreWasteBudget, scenario.restoreWasteBurstSeconds)) {
      return usageError(kCommand,
                        "--waste-budget needs W[,SECONDS]: W in [0, 1), SECONDS in (0, 1000]");
    }
  }
  if (auto hol = args.get("revoke-on-block")) {
    if (*hol != "on" && *hol != "off") {
      return usageError(kCommand, "--revoke-on-block must be on or off");
    }
    scenario.restoreRevokeOnBlock = *hol == "on" ? 1 : 0;
  }
  if (auto z = args.get("burst-significance")) {
    const auto v = parseDouble(*z);
    if (!v || !(*v >= 0.0 && *v <= 100.0)) {
      return usageError(kCommand, "--burst-significance needs a number in [0, 100]");
    }
    scenario.restoreBurstSignificance = *v;
  }
  if (auto lost = args.get("lost-completions")) {
    const auto v = parseDouble(*lost);
    if (!v || !(*v >= 0.0 && *v <= 1.0)) {
      return usageError(kCommand, "--lost-completions needs a fraction in [0, 1]");
    }
    scenario.pool.lostCompletions = *v;
  }
  unsigned jobs = 0;
  if (auto j = args.get("jobs")) {
    const auto v = parseDouble(*j);
    if (!v || !(*v >= 1.0 && *v <= 256.0) || *v != static_cast<double>(static_cast<int>(*v))) {
      return usageError(kCommand, "--jobs needs an integer in [1, 256]");
    }
    jobs = static_cast<unsigned>(*v);
  }
  const std::string format = args.get("format").value_or("table");
  if (format != "table" && format != "json") {
    return usageError(kCommand, "--format must be table or json");
  }
  std::vector<sim::Arm> arms = sim::allArms();
  if (auto list = args.get("arms")) {
    arms.clear();
    std::stringstream in(*list);
    std::string name;
    while (std::getline(in, name, ',')) {
      sim::Arm arm;
      if (!sim::findArm(name, arm)) {
        return usageError(kCommand, "unknown arm \"" + name + "\"; known: " + sim::armNames());
      }
      arms.push_back(arm);
    }
    if (arms.empty()) return usageError(kCommand, "--arms needs at least one arm");
  }
  const auto plotDir = args.get("plot");
  auto csvDir = args.get("csv");
  if (plotDir && !csvDir) csvDir = plotDir;

  const auto start = std::chrono::steady_clock::now();
  const sim::Evaluation evaluation = sim::evaluate(scenario, {.seeds = seeds,
                                                              .detectors = detectors,
                                                              .arms = arms,
                                                              .threads = jobs,
                                                              .collectSeries = csvDir.has_value()});
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (evaluation.truncatedRuns > 0) {
    std::cerr << "holdback simulate: " << evaluation.truncatedRuns << " of " << evaluation.runs
              << " runs reached the limit of " << sim::kMaxRequestsPerRun
              << " requests and stopped early, so their figures would be partial; lower "
                 "durationSeconds or the rates\n";
    return kExitInvalid;
  }
  std::cerr << "simulate: " << evaluation.runs << " runs (" << arms.size() << " arms x "
            << detectors.size() << " detectors x " << seeds.size()
            << " seeds, plus unloaded baselines and the static-1.0 reference) in "
            << static_cast<int>(elapsed * 10) / 10.0 << " s\n";

  if (format == "json") {
    std::cout << sim::formatJson(evaluation);
  } else if (args.has("detail")) {
    for (std::size_t d = 0; d < evaluation.reports.size(); ++d) {
      if (seeds.size() == 1) {
        scenario.detector = detectors[d];
        std::cout << (d == 0 ? "" : "\n\n")
                  << sim::formatTable(scenario, evaluation.reports[d].firstSeed);
      }
    }
    std::cout << sim::formatSummary(evaluation) << sim::formatOverview(evaluation);
  } else {
    std::cout << sim::formatOverview(evaluation);
  }

  // In the CSV files and pictures the arms are named <detector>-<arm> when more than one
  // detector runs.
  std::vector<sim::ArmResult> results;
  for (const sim::DetectorReport& report : evaluation.reports) {
    for (sim::ArmResult r : report.firstSeed) {
      if (detectors.size() > 1)
        r.arm.name = std::string(sim::toString(report.detector)) + "-" + r.arm.name;
      results.push_back(std::move(r));
    }
  }
  if (csvDir) {
    const std::filesystem::path dir(*csvDir);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !writeFile(dir / "summary.csv", sim::summaryCsv(results)) ||
        !writeFile(dir / "requests.csv", sim::requestsCsv(scenario, results)) ||
        !writeFile(dir / "intervals.csv", sim::intervalsCsv(scenario, results)) ||
        !writeFile(dir / "ttft-cdf.csv", sim::ttftCdfCsv(scenario, results)) ||
        !writeFile(dir / "pareto.csv", sim::paretoCsv(evaluation))) {
      return usageError(kCommand, "cannot write CSV files into " + *csvDir);
    }
    std::cerr << "simulate: wrote summary.csv, requests.csv, intervals.csv, ttft-cdf.csv and "
                 "pareto.csv into "
              << *csvDir << "\n";
  }
  if (plotDir) {
    const std::filesystem::path dir(*plotDir);
    if (!writeFile(dir / "simulation.gp", sim::gnuplotScript(scenario, results)) ||
        !writeFile(dir / "pareto.gp", sim::paretoGnuplot(evaluation))) {
      return usageError(kCommand, "cannot write the gnuplot scripts into " + dir.string());
    }
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
      std::cerr << "simulate: gnuplot is not installed (apt-get install gnuplot-nox); run "
                   "'gnuplot simulation.gp pareto.gp' in "
                << *plotDir << " to render the pictures\n";
      return kExitOk;
    }
    const std::string command = "cd '" + dir.string() + "' && gnuplot simulation.gp pareto.gp";
    if (std::system(command.c_str()) != 0) {
      std::cerr << "simulate: gnuplot failed (" << command << ")\n";
      return kExitUsage;
    }
    std::cerr << "simulate: rendered the pictures into " << *plotDir << "\n";
  }
  return kExitOk;
}

}  // namespace holdback::cli
