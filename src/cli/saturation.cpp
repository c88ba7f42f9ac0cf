// holdback saturation: run a saturation detector over an endpoint snapshot and print the pool's
// saturation and the endpoints its filter keeps.
#include <algorithm>
#include <iostream>
#include <limits>
#include <set>
#include <vector>

#include "common.hpp"
#include "holdback/config/detector_config.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/stage_saturation.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kSaturationHelp =
    R"(Usage: holdback saturation --config FILE --endpoints FILE [--now-ms T] [--no-ledger]
                           [--scores]

Runs the saturation detector in the config FILE over the endpoints in the endpoints FILE at time
T and prints one JSON object:

  {"detector":{"type":T,"name":N},"saturation":S,"filtered":[names...],"failOpen":B}

saturation is stage-aware (prefill and decode stages evaluated separately, the maximum taken; a
pool without prefill endpoints is evaluated as a whole). filtered lists, in order, the endpoints
the detector's filter keeps; failOpen is true when it kept none and returned the whole list.

Options:
  --config FILE     one detector plugin object ({"type":"utilization-detector", "name":...,
                    "parameters":{...}}) or an EndpointPickerConfig, whose
                    flowControl.saturationDetector.pluginRef names the detector (absent: the
                    plugin named utilization-detector, else a utilization-detector with defaults)
  --endpoints FILE  a JSON array of endpoint objects:
                      {"name": "pod-a",               required, unique
                       "waitingQueueSize": 3,         vllm:num_requests_waiting
                       "kvCacheUsagePercent": 0.42,   vllm:kv_cache_usage_perc, a fraction in [0,1]
                       "updateTimeMs": 1700000000000, when the metrics were scraped; absent = none
                       "role": "decode",              prefill, decode, prefill-decode, ...
                       "weight": 1.0,                 relative capacity (aggregation "weighted")
                       "inFlightRequests": 0,         for concurrency-detector
                       "inFlightTokens": 0,
                       "runningRequests": 12,         vllm:num_requests_running
                       "maxRunningRequests": 16,      the server's --max-num-seqs (0 = unknown)
                       "kvCapacityTokens": 100000,    the server's KV capacity (0 = unknown)
                       "pendingRequests": 3,          dispatched since the scrape, not finished
                       "pendingTokens": 1500}         their tokens
                    every field but name is optional; numbers are passed to the detector as
                    given (negative telemetry is scored as the detector documents)
  --now-ms T        the current time in the same milliseconds as updateTimeMs (default: the
                    largest updateTimeMs in the file, or 0)
  --no-ledger       do not correct the scraped figures with pendingRequests/pendingTokens
                    (default: a DispatchLedger with the file's flowControl.dispatchLedger
                    options corrects them, as a host feeding the ledger would; see
                    docs/guide/detectors.md)
  --scores          add "endpoints": [{"name", "waitingQueueSize", "runningRequests",
                    "kvCacheUsage", "score"}] with the figures the detector saw (corrected) and
                    each endpoint's own roofline score before the endpointScoreCap (null when
                    stale or invalid, or for a detector other than utilization-detector)
  --help            this text

Exit codes: 0 success, 1 invalid config or endpoints file (every problem is printed), 2 usage
error.
)";

// Milliseconds that still fit an int64 count of nanoseconds.
constexpr std::int64_t kMaxMs = std::numeric_limits<std::int64_t>::max() / 1'000'000;

// What the endpoints file says about the ledger: capacity and the work since the scrape.
struct Pending {
  EndpointCapacity capacity;
  std::int64_t requests = 0;
  std::int64_t tokens = 0;
};

struct Snapshot {
  std::vector<Endpoint> endpoints;
  std::vector<Pending> pending;  // one per endpoint
  std::optional<std::int64_t> latestMs;
};

// At most this many pending requests per endpoint (each is one ledger event).
constexpr std::int64_t kMaxPendingRequests = 1'000'000;

std::optional<Snapshot> readEndpoints(const config::Json& document, Diagnostics& diagnostics) {
  const std::size_t errors_before = diagnostics.errorCount();
  if (!document.is_array()) {
    diagnostics.error("", config::mismatch(document, "an array of endpoint objects"));
    return std::nullopt;
  }
  Snapshot out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < document.size(); ++i) {
    const std::string path = "/" + std::to_string(i);
    const std::size_t before = diagnostics.errorCount();
    config::ParamReader reader(&document[i], path, diagnostics);
    if (diagnostics.errorCount() > before) continue;
    Endpoint e;
    const auto name = reader.string("name");
    if (!reader.has("name")) reader.error("name", "missing; every endpoint needs a \"name\"");
    if (name && name->empty()) reader.error("name", "is empty; expected a non-empty string");
    if (name && !name->empty() && !names.insert(*name).second) {
      reader.error("name", "duplicate endpoint name \"" + *name + "\"; names must be unique");
    }
    if (name) e.name = *name;
    if (const auto v = reader.number("waitingQueueSize")) e.waitingQueueSize = *v;
    if (const auto v = reader.number("kvCacheUsagePercent")) e.kvCacheUsage = *v;
    if (const auto v = reader.integer("updateTimeMs", -kMaxMs, kMaxMs)) {
      e.updateTime = TimePoint{} + std::chrono::milliseconds(*v);
      out.latestMs = std::max(out.latestMs.value_or(*v), *v);
    }
    if (const auto v = reader.string("role")) {
      e.role = parseEndpointRole(*v);
      if (e.role == EndpointRole::kUnknown) {
        diagnostics.warning(reader.pathOf("role"),
                            "\"" + *v +
                                "\" is not a known role (prefill, decode, prefill-decode, both, "
                                "encode-prefill, encode-prefill-decode, encode); the endpoint is "
                                "in neither stage");
      }
    }
    if (const auto v = reader.number("weight")) e.weight = *v;
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    if (const auto v = reader.integer("inFlightRequests", kMin, kMax)) e.inFlightRequests = *v;
    if (const auto v = reader.integer("inFlightTokens", kMin, kMax)) e.inFlightTokens = *v;
    if (const auto v = reader.number("runningRequests")) e.runningRequests = *v;
    Pending p;
    if (const auto v = reader.integer("maxRunningRequests", 0, kMax)) {
      p.capacity.maxRunningRequests = *v;
    }
    if (const auto v = reader.integer("kvCapacityTokens", 0, kMax))
      p.capacity.kvCapacityTokens = *v;
    if (const auto v = reader.integer("pendingRequests", 0, kMaxPendingRequests)) p.requests = *v;
    if (const auto v = reader.integer("pendingTokens", 0, DispatchLedger::kMaxTokensPerRequest)) {
      p.tokens = *v;
    }
    reader.finish();
    out.endpoints.push_back(std::move(e));
    out.pending.push_back(p);
  }
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return out;
}

// Runs the endpoints' scrapes and pending work through a DispatchLedger, as a host would, and
// takes the corrected telemetry (the in-flight counts stay as the file gives them).
void correct(std::vector<Endpoint>& endpoints, const std::vector<Pending>& pending,
             DispatchLedgerOptions options) {
  DispatchLedger ledger(options);
  std::vector<EndpointId> ids;
  ids.reserve(endpoints.size());
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    const Endpoint& e = endpoints[i];
    const EndpointId id = ledger.registerEndpoint(e.name, pending[i].capacity);
    ids.push_back(id);
    if (!e.updateTime) continue;  // no scrape: nothing to correct
    ledger.installScrape(id, {.updateTime = *e.updateTime,
                              .waitingQueueSize = e.waitingQueueSize,
                              .runningRequests = e.runningRequests,
                              .kvCacheUsage = e.kvCacheUsage});
    for (std::int64_t k = 0; k < pending[i].requests; ++k) {
      ledger.recordDispatch(id, k == 0 ? pending[i].tokens : 0);
    }
  }
  std::vector<Endpoint> filled = endpoints;
  ledger.fill(filled, ids);
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    if (!endpoints[i].updateTime) continue;
    endpoints[i].waitingQueueSize = filled[i].waitingQueueSize;
    endpoints[i].runningRequests = filled[i].runningRequests;
    endpoints[i].kvCacheUsage = filled[i].kvCacheUsage;
  }
}

}  // namespace

int runSaturation(int argc, char** argv) {
  Args args;
  if (auto error = parseArgs(argc, argv, 2, {"config", "endpoints", "now-ms"}, args,
                             {"no-ledger", "scores"})) {
    return usageError("saturation", *error);
  }
  if (args.help) {
    std::cout << kSaturationHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return usageError("saturation", "unexpected argument \"" + args.positional.front() + "\"");
  }
  const auto config_file = args.get("config");
  const auto endpoints_file = args.get("endpoints");
  if (!config_file) return usageError("saturation", "--config FILE is required");
  if (!endpoints_file) return usageError("saturation", "--endpoints FILE is required");
  std::optional<std::int64_t> now_ms;
  if (const auto text = args.get("now-ms")) {
    now_ms = config::parseIntegerKey(*text, -kMaxMs, kMaxMs);
    if (!now_ms) {
      return usageError("saturation", "--now-ms \"" + *text + "\" is not an integer in [" +
                                          std::to_string(-kMaxMs) + ", " + std::to_string(kMaxMs) +
                                          "]");
    }
  }

  // Load both files and report every problem in both before giving up.
  int config_exit = kExitOk;
  Diagnostics config_diagnostics;
  config::SourceMap config_positions;
  const auto config_document = loadConfigFile("saturation", *config_file, config_diagnostics,
                                              config_exit, &config_positions);
  if (config_exit == kExitUsage) return config_exit;
  int endpoints_exit = kExitOk;
  Diagnostics endpoints_diagnostics;
  config::SourceMap endpoints_positions;
  const auto endpoints_document = loadConfigFile(
      "saturation", *endpoints_file, endpoints_diagnostics, endpoints_exit, &endpoints_positions);
  if (endpoints_exit == kExitUsage) return endpoints_exit;

  std::optional<std::shared_ptr<SaturationDetector>> detector;
  DispatchLedgerOptions ledger_options;
  if (config_document) {
    if (auto whole = loadWholeFile(*config_document, config_positions, config_diagnostics)) {
      if (*whole && !config_diagnostics.hasErrors()) {
        detector = whole->value()->detector;
        ledger_options = whole->value()->dispatchLedger;
      }
    } else {
      auto loaded =
          config::loadSaturationDetector(*config_document, config::builtinDetectorRegistry());
      config_diagnostics.append(loaded.diagnostics());
      if (loaded && !config_diagnostics.hasErrors()) {
        detector = loaded.value();
        // One plugin object: its (deprecated) parameters.dispatchLedger, already checked.
        Diagnostics checked;
        ledger_options =
            config::loadDispatchLedgerOptions(*config_document, detector->get(), checked);
      }
    }
    config_diagnostics = config::withPositions(config_diagnostics, config_positions);
    printDiagnostics(*config_file, config_diagnostics);
  }
  std::optional<Snapshot> snapshot;
  if (endpoints_document) {
    snapshot = readEndpoints(*endpoints_document, endpoints_diagnostics);
    endpoints_diagnostics = config::withPositions(endpoints_diagnostics, endpoints_positions);
    if (endpoints_diagnostics.hasErrors()) snapshot.reset();
    printDiagnostics(*endpoints_file, endpoints_diagnostics);
  }
  if (!detector || !snapshot) return kExitInvalid;

  const TimePoint now =
      TimePoint{} + std::chrono::milliseconds(now_ms.value_or(snapshot->latestMs.value_or(0)));
  if (args.has("no-ledger")) {
    ledger_options.correction = false;
    ledger_options.dispatchBudget = false;
  }
  correct(snapshot->endpoints, snapshot->pending, ledger_options);
  const std::vector<Endpoint>& endpoints = snapshot->endpoints;
  StageSaturationEvaluator evaluator;
  const StageSaturation saturation = evaluator.evaluate(**detector, endpoints, now);
  std::vector<std::size_t> kept(endpoints.size());
  const FilterResult filtered = (*detector)->filter(endpoints, now, kept);

  // ordered_json keeps the documented key order.
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line["detector"]["type"] = (*detector)->type();
  line["detector"]["name"] = (*detector)->name();
  line["saturation"] = saturation.effective;
  line["filtered"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < filtered.kept; ++i)
    line["filtered"].push_back(endpoints[kept[i]].name);
  line["failOpen"] = filtered.failOpen;
  if (args.has("scores")) {
    line["endpoints"] = nlohmann::ordered_json::array();
    for (const Endpoint& e : endpoints) {
      nlohmann::ordered_json item = nlohmann::ordered_json::object();
      item["name"] = e.name;
      item["waitingQueueSize"] = e.waitingQueueSize;
      item["runningRequests"] = e.runningRequests;
      item["kvCacheUsage"] = e.kvCacheUsage;
      const std::optional<double> score = (*detector)->endpointScore(e, now);
      item["score"] = score ? nlohmann::ordered_json(*score) : nlohmann::ordered_json(nullptr);
      line["endpoints"].push_back(std::move(item));
    }
  }
  std::cout << line.dump() << "\n";
  return kExitOk;
}

}  // namespace holdback::cli
