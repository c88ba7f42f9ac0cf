// holdback ceilings: run a usage limit policy over a priority list and print the ceilings.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "common.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/policy/demand.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kCeilingsHelp =
    R"(Usage: holdback ceilings [--config FILE] [--priorities LIST] [--saturation S] [--cycles N]

Computes the admission ceiling of every priority with the usage limit policy in FILE and prints
one JSON object per dispatch cycle on its own line:

  {"policy":{"type":T,"name":N},"saturation":S,"ceilings":[{"priority":P,"ceiling":C,"gated":B},...]}

A band is gated when saturation >= ceiling.

Options:
  --config FILE      JSON or YAML (detected by content): one plugin object ({"type":..., "name":..., "parameters":{...}}) or an
                     EndpointPickerConfig, whose flowControl.usageLimitPolicyPluginRef names the
                     policy (absent: static-usage-limit-policy, threshold 1.0). Without --config
                     the built-in example is used: the proposal's sigmoid-smoothed policy
                     (minCeiling 0.6, maxCeiling 1.0, steepness 8, midpoint 0.5, value domain).
  --priorities LIST  comma-separated integers in any order; sorted highest first and
                     de-duplicated (default: 100,50,0,-1)
  --saturation S     pool saturation, a number or nan, inf, -inf (default 0). NaN is treated as
                     1.0 and negative values as 0.0; the value used is printed ("inf" as a string).
  --cycles N         number of dispatch cycles to compute (default 1); stateful policies such as
                     soft-reflective-ceiling-policy change from cycle to cycle
  --demand P=OCC[,RATE[,HOLD]]
                     repeatable: the measured demand of priority P (one of --priorities):
                     occupancy OCC requests (in flight + queued), arrival rate RATE per second
                     (default 0), holding time HOLD seconds (default 0 = not measured); all OCC
                     is taken as in flight, completing at OCC / HOLD per second (0 without
                     HOLD). With any --demand the policy gets a demand view (computeLimit with
                     DemandView); priorities without one get zero demand. Each is a finite
                     number >= 0.
  --request-unit U   saturation units per in-flight request in the demand view (a number in
                     (0, 1]; default: none, NaN, the policy's own requestUnit applies)
  --help             this text

Exit codes: 0 success, 1 invalid config file, 2 usage error.
)";

constexpr std::string_view kBuiltinConfig = R"({
  "apiVersion": "llm-d.ai/v1alpha1",
  "kind": "EndpointPickerConfig",
  "featureGates": ["flowControl"],
  "plugins": [
    {"type": "priority-holdback-policy", "name": "dynamic-holdback",
     "parameters": {"strategy": "sigmoid-smoothed", "minCeiling": 0.6, "maxCeiling": 1.0,
                    "sigmoidSteepness": 8.0, "sigmoidMidpoint": 0.5, "sigmoidDomain": "value"}}
  ],
  "flowControl": {"usageLimitPolicyPluginRef": "dynamic-holdback"}
})";

std::optional<std::vector<Priority>> parsePriorities(std::string_view list, std::string& error) {
  std::vector<Priority> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    const auto value = config::parseIntegerKey(item, std::numeric_limits<Priority>::min(),
                                               std::numeric_limits<Priority>::max());
    if (!value) {
      error = "\"" + std::string(item) + "\" in --priorities is not an integer in [" +
              std::to_string(std::numeric_limits<Priority>::min()) + ", " +
              std::to_string(std::numeric_limits<Priority>::max()) + "]";
      return std::nullopt;
    }
    out.push_back(static_cast<Priority>(*value));
    start = comma + 1;
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct DemandArg {
  Priority priority = 0;
  BandDemand demand;
};

// "P=OCC[,RATE[,HOLD]]".
std::optional<DemandArg> parseDemand(std::string_view text, std::string& error) {
  const std::string where = "--demand \"" + std::string(text) + "\"";
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    error = where + " is not PRIORITY=OCCUPANCY[,RATE[,HOLD]]";
    return std::nullopt;
  }
  const auto prio =
      config::parseIntegerKey(text.substr(0, eq), std::numeric_limits<Priority>::min(),
                              std::numeric_limits<Priority>::max());
  if (!prio) {
    error = where + ": the priority is not an integer";
    return std::nullopt;
  }
  DemandArg out;
  out.priority = static_cast<Priority>(*prio);
  double* fields[] = {&out.demand.occupancy, &out.demand.arrivalRate, &out.demand.holdingTime};
  const char* names[] = {"occupancy", "rate", "holding time"};
  std::string_view rest = text.substr(eq + 1);
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const auto v = parseDouble(std::string(rest.substr(0, comma)));
    if (!v || !std::isfinite(*v) || *v < 0.0) {
      error = where + ": the " + names[i] + " \"" + std::string(rest.substr(0, comma)) +
              "\" is not a finite number >= 0";
      return std::nullopt;
    }
    *fields[i] = *v;
    if (comma == rest.size()) break;
    if (i == 2) {
      error = where + " has more than three numbers";
      return std::nullopt;
    }
    rest = rest.substr(comma + 1);
  }
  out.demand.inFlight = out.demand.occupancy;
  return out;
}

}  // namespace

int runCeilings(int argc, char** argv) {
  // --demand is repeatable: collected here, the rest goes to parseArgs.
  std::vector<std::string> demand_texts;
  std::vector<char*> rest_argv;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i >= 2 && arg == "--demand") {
      if (i + 1 >= argc) return usageError("ceilings", "--demand needs a value");
      demand_texts.emplace_back(argv[++i]);
    } else if (i >= 2 && arg.starts_with("--demand=")) {
      demand_texts.emplace_back(arg.substr(9));
    } else {
      rest_argv.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(rest_argv.size());
  argv = rest_argv.data();
  Args args;
  if (auto error = parseArgs(
          argc, argv, 2, {"config", "priorities", "saturation", "cycles", "request-unit"}, args)) {
    return usageError("ceilings", *error);
  }
  if (args.help) {
    std::cout << kCeilingsHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) {
    return usageError("ceilings", "unexpected argument \"" + args.positional.front() + "\"");
  }

  std::string error;
  const auto priorities = parsePriorities(args.get("priorities").value_or("100,50,0,-1"), error);
  if (!priorities) return usageError("ceilings", error);

  const std::string saturation_text = args.get("saturation").value_or("0");
  const auto saturation = parseDouble(saturation_text);
  if (!saturation) {
    return usageError("ceilings", "--saturation \"" + saturation_text +
                                      "\" is not a number (nan, inf and -inf are accepted)");
  }
  const std::string cycles_text = args.get("cycles").value_or("1");
  const auto cycles = config::parseIntegerKey(cycles_text, 1, 1'000'000);
  if (!cycles) {
    return usageError("ceilings",
                      "--cycles \"" + cycles_text + "\" is not an integer in [1, 1000000]");
  }

  std::vector<BandDemand> demand_bands;
  if (!demand_texts.empty()) demand_bands.assign(priorities->size(), BandDemand{});
  for (const std::string& text : demand_texts) {
    const auto d = parseDemand(text, error);
    if (!d) return usageError("ceilings", error);
    const auto it = std::find(priorities->begin(), priorities->end(), d->priority);
    if (it == priorities->end()) {
      return usageError("ceilings", "--demand \"" + text + "\": priority " +
                                        std::to_string(d->priority) + " is not in --priorities");
    }
    demand_bands[static_cast<std::size_t>(it - priorities->begin())] = d->demand;
  }
  double request_unit = std::numeric_limits<double>::quiet_NaN();
  if (const auto unit_text = args.get("request-unit")) {
    const auto unit = parseDouble(*unit_text);
    if (!unit || !(*unit > 0.0) || *unit > 1.0) {
      return usageError("ceilings",
                        "--request-unit \"" + *unit_text + "\" is not a number in (0, 1]");
    }
    request_unit = *unit;
  }

  int exit_code = kExitOk;
  Diagnostics diagnostics;
  config::SourceMap positions;
  std::optional<config::Json> document;
  std::string source = "<built-in example>";
  if (const auto file = args.get("config")) {
    source = *file;
    document = loadConfigFile("ceilings", *file, diagnostics, exit_code, &positions);
    if (!document) return exit_code;
  } else {
    document = config::parseJson(kBuiltinConfig).value();
  }
  std::shared_ptr<UsageLimitPolicy> policy;
  if (auto whole = loadWholeFile(*document, positions, diagnostics)) {
    if (*whole) policy = whole->value()->policy;
  } else {
    auto loaded = config::loadUsageLimitPolicy(*document, config::builtinPolicyRegistry());
    diagnostics.append(loaded.diagnostics());
    if (loaded) policy = loaded.value();
  }
  diagnostics = config::withPositions(diagnostics, positions);
  printDiagnostics(source, diagnostics);
  if (diagnostics.hasErrors() || !policy) return kExitInvalid;

  const double used = normalizeSaturation(*saturation);
  std::vector<double> ceilings(priorities->size());
  for (std::int64_t cycle = 0; cycle < *cycles; ++cycle) {
    std::fill(ceilings.begin(), ceilings.end(), 1.0);
    if (demand_bands.empty()) {
      policy->computeLimit(*saturation, *priorities, ceilings);
    } else {
      DemandView view;
      view.bands = demand_bands;
      view.requestUnit = request_unit;
      policy->computeLimit(*saturation, *priorities, ceilings, view);
    }
    // ordered_json keeps the documented key order.
    nlohmann::ordered_json line = nlohmann::ordered_json::object();
    line["policy"]["type"] = policy->type();
    line["policy"]["name"] = policy->name();
    line["saturation"] =
        std::isinf(used) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(used);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < priorities->size(); ++i) {
      nlohmann::ordered_json row = nlohmann::ordered_json::object();
      row["priority"] = (*priorities)[i];
      row["ceiling"] = ceilings[i];
      row["gated"] = isGated(used, ceilings[i]);
      rows.push_back(std::move(row));
    }
    line["ceilings"] = std::move(rows);
    std::cout << line.dump() << "\n";
  }
  return kExitOk;
}

}  // namespace holdback::cli
