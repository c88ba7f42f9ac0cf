// holdback validate: the operator's pre-flight check of a config file.
#include <iostream>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "holdback/config/detector_config.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kValidateHelp = R"help(Usage: holdback validate [--json] FILE
       holdback validate --schema

Checks FILE (JSON or YAML, detected by content) and reports every problem at once, each with its
JSON path (and for YAML its line and column). FILE is either a whole EndpointPickerConfig, loaded
exactly as a gateway embedding holdback loads it (every plugin, the usage limit policy, the
saturation detector, feature gates and the flowControl block: bands, templates, global limits,
TTLs), or one usage limit policy or saturation detector plugin object.

Output: problems on stderr, then "FILE: ok: ..." on stdout or "FILE: invalid (N errors)" on
stderr. Fields of the Go gateway's config that mean nothing to holdback (schedulingProfiles,
scorers, ...) are accepted and listed as warnings.

  --json   print one JSON object on stdout instead:
           {"ok": bool, "errors": [...], "warnings": [...], "effective": {...}}, each problem
           {"path": "/plugins/2/parameters/minCeiling", "line": 7, "column": 19, "message": "..."}
           (line and column are 0 when unknown, e.g. for JSON files). "effective" (only for a
           valid whole EndpointPickerConfig) is the configuration after every default: gate,
           policy and detector with their parameters, global limits, TTLs, the band templates
           and every band with its limits, fairness and ordering (schemaVersion 1; see
           docs/guide/configuration.md, "Effective configuration").
  --schema print the configuration keys holdback describes in tables, as JSON, and exit:
           {"schemaVersion": 1, "sections": [{"section": "reservation-holdback-policy",
           "fields": [{"key", "kind", "use", "default", "choices", "checks", "meaning",
           "deprecated"}]}]} (a section is a plugin type; docs/reference/configuration.md takes
           its meaning and use columns from it)

Exit codes: 0 valid (warnings may be printed), 1 invalid, 2 usage error (missing file, bad flag).
)help";

nlohmann::ordered_json toJson(const std::vector<Diagnostic>& list) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Diagnostic& d : list) {
    nlohmann::ordered_json item = nlohmann::ordered_json::object();
    item["path"] = d.path;
    item["line"] = d.line;
    item["column"] = d.column;
    item["message"] = d.message;
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

int runValidate(int argc, char** argv) {
  Args args;
  if (auto error = parseArgs(argc, argv, 2, {}, args, {"json", "schema"})) {
    return usageError("validate", *error);
  }
  if (args.help) {
    std::cout << kValidateHelp;
    return kExitOk;
  }
  if (args.has("schema")) {
    if (!args.positional.empty()) return usageError("validate", "--schema takes no FILE");
    std::cout << config::configSchema().dump(2) << "\n";
    return kExitOk;
  }
  if (args.positional.size() != 1) return usageError("validate", "expected exactly one FILE");
  const std::string& file = args.positional.front();
  const bool json_output = args.has("json");

  Diagnostics diagnostics;
  std::string summary;
  nlohmann::ordered_json effective;  // null unless a whole file loaded
  bool ok = false;
  if (const auto text = config::readTextFile(file); !text) {
    return usageError("validate", "cannot read file \"" + file + "\"");
  } else {
    auto parsed = config::parseDocument(*text);
    diagnostics.append(parsed.diagnostics());
    if (parsed) {
      const config::Json& document = parsed->json;
      if (auto whole = loadWholeFile(document, parsed->positions, diagnostics)) {
        if (*whole) {
          const config::ConfigBundle& bundle = *whole->value();
          summary = "usage limit policy \"" + std::string(bundle.policy->name()) + "\" (type " +
                    std::string(bundle.policy->type()) + "), saturation detector \"" +
                    std::string(bundle.detector->name()) + "\" (type " +
                    std::string(bundle.detector->type()) + ")";
          effective = config::effectiveConfig(bundle);
          ok = true;
        }
      } else {
        // One plugin object: a policy or a detector, by its type.
        const auto detectors = config::builtinDetectorRegistry();
        const bool detector = document.is_object() && document["type"].is_string() &&
                              detectors.contains(document["type"].get<std::string>());
        if (detector) {
          auto loaded = config::loadSaturationDetector(document, detectors);
          diagnostics.append(loaded.diagnostics());
          if (loaded) {
            summary = "saturation detector \"" + std::string(loaded.value()->name()) + "\" (type " +
                      std::string(loaded.value()->type()) + ")";
            ok = true;
          }
        } else {
          auto loaded = config::loadUsageLimitPolicy(document, config::builtinPolicyRegistry());
          diagnostics.append(loaded.diagnostics());
          if (loaded) {
            summary = "usage limit policy \"" + std::string(loaded.value()->name()) + "\" (type " +
                      std::string(loaded.value()->type()) + ")";
            ok = true;
          }
        }
      }
      diagnostics = config::withPositions(diagnostics, parsed->positions);
    }
  }
  ok = ok && !diagnostics.hasErrors();

  if (json_output) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["ok"] = ok;
    out["errors"] = toJson(diagnostics.errors());
    out["warnings"] = toJson(diagnostics.warnings());
    if (ok && !effective.is_null()) out["effective"] = std::move(effective);
    std::cout << out.dump(2) << "\n";
    return ok ? kExitOk : kExitInvalid;
  }
  printDiagnostics(file, diagnostics);
  if (!ok) {
    std::cerr << file << ": invalid (" << diagnostics.errorCount() << " error"
              << (diagnostics.errorCount() == 1 ? "" : "s") << ")\n";
    return kExitInvalid;
  }
  const std::size_t warnings = diagnostics.warnings().size();
  std::cout << file << ": ok: " << summary;
  if (warnings > 0) std::cout << ", " << warnings << " warning" << (warnings == 1 ? "" : "s");
  std::cout << "\n";
  return kExitOk;
}

}  // namespace holdback::cli
