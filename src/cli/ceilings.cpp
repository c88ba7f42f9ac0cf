// holdback ceilings: run a usage limit policy over a priority list and print the ceilings.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "common.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kHelp =
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

}  // namespace

int runCeilings(int argc, char** argv) {
  Args args;
  if (auto error =
          parseArgs(argc, argv, 2, {"config", "priorities", "saturation", "cycles"}, args)) {
    return usageError("ceilings", *error);
  }
  if (args.help) {
    std::cout << kHelp;
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
    policy->computeLimit(*saturation, *priorities, ceilings);
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
