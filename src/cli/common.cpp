#include "common.hpp"

#include <charconv>
#include <iostream>

namespace holdback::cli {

std::optional<std::string> Args::get(std::string_view name) const {
  const auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

bool Args::has(std::string_view flag) const {
  for (const std::string& f : flags) {
    if (f == flag) return true;
  }
  return false;
}

std::optional<std::string> parseArgs(int argc, char** argv, int first,
                                     const std::vector<std::string>& valueOptions, Args& out,
                                     const std::vector<std::string>& flagOptions) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    bool is_flag = false;
    for (const std::string& f : flagOptions) is_flag = is_flag || f == name;
    if (is_flag) {
      if (value) return "option --" + name + " takes no value";
      out.flags.push_back(name);
      continue;
    }
    bool known = false;
    for (const std::string& v : valueOptions) known = known || v == name;
    if (!known) return "unknown option --" + name;
    if (!value) {
      if (i + 1 >= argc) return "option --" + name + " needs a value";
      value = argv[++i];
    }
    if (out.options.count(name) != 0) return "option --" + name + " given twice";
    out.options.emplace(name, *value);
  }
  return std::nullopt;
}

int usageError(std::string_view command, std::string_view message) {
  std::cerr << "holdback " << command << ": " << message << "\n"
            << "Run 'holdback " << command << " --help' for usage.\n";
  return kExitUsage;
}

void printDiagnostics(std::string_view file, const Diagnostics& diagnostics) {
  for (const Diagnostic& d : diagnostics.all()) {
    std::cerr << file << ": " << (d.severity == Severity::kError ? "error: " : "warning: ")
              << d.toString() << "\n";
  }
}

std::optional<config::Json> loadConfigFile(std::string_view command, const std::string& file,
                                           Diagnostics& diagnostics, int& exitCode,
                                           config::SourceMap* positions) {
  const auto text = config::readTextFile(file);
  if (!text) {
    exitCode = usageError(command, "cannot read file \"" + file + "\"");
    return std::nullopt;
  }
  auto parsed = config::parseDocument(*text);
  diagnostics.append(parsed.diagnostics());
  if (!parsed) {
    printDiagnostics(file, diagnostics);
    exitCode = kExitInvalid;
    return std::nullopt;
  }
  if (positions != nullptr) *positions = std::move(parsed.value().positions);
  return std::move(parsed.value().json);
}

std::optional<config::BundleResult> loadWholeFile(const config::Json& json,
                                                  const config::SourceMap& positions,
                                                  Diagnostics& diagnostics) {
  if (!config::isEndpointPickerConfig(json)) return std::nullopt;
  config::Document document;
  document.json = json;
  document.positions = positions;
  auto loaded = config::loadEndpointPickerConfig(document);
  diagnostics.append(loaded.diagnostics());
  return loaded;
}

std::optional<double> parseDouble(std::string_view text) {
  if (text == "nan" || text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf" || text == "+inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  double value = 0.0;
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, value);
  if (text.empty() || ec != std::errc() || ptr != last) return std::nullopt;
  return value;
}

}  // namespace holdback::cli
