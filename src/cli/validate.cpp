// holdback validate: the operator's pre-flight check of a config file.
#include <iostream>

#include "common.hpp"
#include "holdback/config/detector_config.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kHelp = R"(Usage: holdback validate FILE

Checks FILE (JSON or YAML, detected by content), either one usage limit policy or saturation
detector plugin object or an EndpointPickerConfig, and reports every problem at once on stderr,
each with its JSON path (and for YAML its line and column). In an EndpointPickerConfig every
plugin of a usage limit policy or saturation detector type is checked;
flowControl.usageLimitPolicyPluginRef must name a policy and
flowControl.saturationDetector.pluginRef a detector.

Exit codes: 0 valid (warnings may be printed), 1 invalid, 2 usage error (missing file, bad flag).
)";

bool sameDiagnostic(const Diagnostic& a, const Diagnostic& b) {
  return a.severity == b.severity && a.path == b.path && a.message == b.message &&
         a.line == b.line && a.column == b.column;
}

// Appends the detector loader's diagnostics to the policy loader's: drops the policy loader's
// "not a usage limit policy type" warning for plugins of a detector type (checked here), and
// problems both loaders found (plugin objects, duplicate names).
void mergeDetectorDiagnostics(const config::Json& document,
                              const config::DetectorRegistry& registry, const Diagnostics& detector,
                              Diagnostics& out) {
  Diagnostics merged;
  for (const Diagnostic& d : out.all()) {
    bool checked_here = false;
    if (d.severity == Severity::kWarning && d.message.ends_with("not checked here")) {
      const auto plugins = document.find("plugins");
      if (plugins != document.end() && plugins->is_array()) {
        for (std::size_t i = 0; i < plugins->size(); ++i) {
          const config::Json& plugin = (*plugins)[i];
          if (d.path == "/plugins/" + std::to_string(i) + "/type" && plugin.is_object() &&
              plugin.contains("type") && plugin["type"].is_string() &&
              registry.contains(plugin["type"].get<std::string>())) {
            checked_here = true;
          }
        }
      }
    }
    if (!checked_here) merged.add(d);
  }
  for (const Diagnostic& d : detector.all()) {
    bool seen = false;
    for (const Diagnostic& m : merged.all()) seen = seen || sameDiagnostic(d, m);
    if (!seen) merged.add(d);
  }
  out = std::move(merged);
}

}  // namespace

int runValidate(int argc, char** argv) {
  Args args;
  if (auto error = parseArgs(argc, argv, 2, {}, args)) return usageError("validate", *error);
  if (args.help) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (args.positional.size() != 1) return usageError("validate", "expected exactly one FILE");
  const std::string& file = args.positional.front();

  int exit_code = kExitOk;
  Diagnostics diagnostics;
  config::SourceMap positions;
  const auto document = loadJsonFile("validate", file, diagnostics, exit_code, &positions);
  if (!document) return exit_code;
  const auto detectors = config::builtinDetectorRegistry();
  const bool is_plugin = document->is_object() && document->contains("type");
  const bool detector_plugin = is_plugin && (*document)["type"].is_string() &&
                               detectors.contains((*document)["type"].get<std::string>());

  std::optional<Result<std::shared_ptr<UsageLimitPolicy>>> policy;
  std::optional<Result<std::shared_ptr<SaturationDetector>>> detector;
  if (!detector_plugin) {
    policy = config::loadUsageLimitPolicy(*document, config::builtinPolicyRegistry());
    diagnostics.append(policy->diagnostics());
  }
  if (detector_plugin || !is_plugin) {
    detector = config::loadSaturationDetector(*document, detectors);
    if (detector_plugin) {
      diagnostics.append(detector->diagnostics());
    } else {
      mergeDetectorDiagnostics(*document, detectors, detector->diagnostics(), diagnostics);
    }
  }
  diagnostics = config::withPositions(diagnostics, positions);
  printDiagnostics(file, diagnostics);
  if (diagnostics.hasErrors() || (policy && !policy->ok()) || (detector && !detector->ok())) {
    std::cerr << file << ": invalid (" << diagnostics.errorCount() << " error"
              << (diagnostics.errorCount() == 1 ? "" : "s") << ")\n";
    return kExitInvalid;
  }
  const std::size_t warnings = diagnostics.warnings().size();
  std::cout << file << ": ok: ";
  if (policy) {
    std::cout << "usage limit policy \"" << policy->value()->name() << "\" (type "
              << policy->value()->type() << ")";
  }
  if (detector) {
    std::cout << (policy ? ", " : "") << "saturation detector \"" << detector->value()->name()
              << "\" (type " << detector->value()->type() << ")";
  }
  if (warnings > 0) std::cout << ", " << warnings << " warning" << (warnings == 1 ? "" : "s");
  std::cout << "\n";
  return kExitOk;
}

}  // namespace holdback::cli
