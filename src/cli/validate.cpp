// holdback validate: the operator's pre-flight check of a config file.
#include <iostream>

#include "common.hpp"
#include "holdback/config/policy_config.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kHelp = R"(Usage: holdback validate FILE

Checks FILE (JSON or YAML, detected by content), either one usage limit policy plugin object or
an EndpointPickerConfig, and reports every problem at once on stderr, each with its JSON path (and
for YAML its line and column). In an EndpointPickerConfig every plugin of a usage limit policy
type is checked, and flowControl.usageLimitPolicyPluginRef must name one.

Exit codes: 0 valid (warnings may be printed), 1 invalid, 2 usage error (missing file, bad flag).
)";

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
  const auto policy = config::loadUsageLimitPolicy(*document, config::builtinPolicyRegistry());
  diagnostics.append(policy.diagnostics());
  diagnostics = config::withPositions(diagnostics, positions);
  printDiagnostics(file, diagnostics);
  if (diagnostics.hasErrors()) {
    std::cerr << file << ": invalid (" << diagnostics.errorCount() << " error"
              << (diagnostics.errorCount() == 1 ? "" : "s") << ")\n";
    return kExitInvalid;
  }
  const std::size_t warnings = diagnostics.warnings().size();
  std::cout << file << ": ok: usage limit policy \"" << policy.value()->name() << "\" (type "
            << policy.value()->type() << ")";
  if (warnings > 0) std::cout << ", " << warnings << " warning" << (warnings == 1 ? "" : "s");
  std::cout << "\n";
  return kExitOk;
}

}  // namespace holdback::cli
