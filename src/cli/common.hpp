// Shared plumbing of the holdback command-line tool: argument parsing, exit codes, file loading.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/document.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"

namespace holdback::cli {

// Exit codes: 0 success, 1 invalid input file (every problem printed), 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 2;

// "--name value" and "--name=value" options, "--flag" switches and positional arguments.
struct Args {
  std::map<std::string, std::string, std::less<>> options;
  std::vector<std::string> positional;
  std::vector<std::string> flags;  // switches given (from parseArgs' `flagOptions`)
  bool help = false;

  [[nodiscard]] bool has(std::string_view flag) const;

  [[nodiscard]] std::optional<std::string> get(std::string_view name) const;
};

// Parses argv[first..argc). `valueOptions` take a value, `flagOptions` are switches without one;
// "--help"/"-h" set `help`. Anything else starting with "--" is an error (returned as a message).
std::optional<std::string> parseArgs(int argc, char** argv, int first,
                                     const std::vector<std::string>& valueOptions, Args& out,
                                     const std::vector<std::string>& flagOptions = {});

// Prints "holdback <command>: <message>" and a pointer to --help on stderr; returns kExitUsage.
int usageError(std::string_view command, std::string_view message);

// Prints each diagnostic on its own line on stderr, prefixed with the file name.
void printDiagnostics(std::string_view file, const Diagnostics& diagnostics);

// Reads and parses a config file, JSON or YAML (detected by content). Unreadable file: message
// printed, returns nullopt and sets `exitCode` to kExitUsage. Syntax error: problems printed,
// exitCode kExitInvalid. Otherwise the document is returned and parse diagnostics (duplicate keys)
// are appended to `diagnostics`, to be printed together with what the caller finds; `positions`,
// when given, receives where each value came from (YAML), for config::withPositions.
std::optional<config::Json> loadConfigFile(std::string_view command, const std::string& file,
                                           Diagnostics& diagnostics, int& exitCode,
                                           config::SourceMap* positions = nullptr);

// Loads a parsed document with the whole-file loader when it is an EndpointPickerConfig (an
// object without "type"); returns nullopt for a single plugin object. Diagnostics (with YAML
// positions) are appended to `diagnostics`.
std::optional<config::BundleResult> loadWholeFile(const config::Json& json,
                                                  const config::SourceMap& positions,
                                                  Diagnostics& diagnostics);

// Parses a number as the tool accepts it: decimal, "nan", "inf", "-inf".
std::optional<double> parseDouble(std::string_view text);

int runCeilings(int argc, char** argv);
int runValidate(int argc, char** argv);
int runSaturation(int argc, char** argv);
int runSimulate(int argc, char** argv);
int runEvictionBench(int argc, char** argv);

}  // namespace holdback::cli
