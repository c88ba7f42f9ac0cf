// Shared helpers of the end-to-end tests: binaries, a scratch directory, metric lookup, medians.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace holdback_e2e {

// A fresh directory under $TMPDIR (or /tmp) for configs and child logs.
inline std::string makeScratchDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "/tmp";
  return pattern;
}

// The value of the first sample of `name` in a Prometheus text body (any labels), or nullopt.
inline std::optional<double> metricValue(std::string_view body, std::string_view name,
                                         std::string_view labelSubstring = {}) {
  std::istringstream in{std::string(body)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    if (!labelSubstring.empty() && line.find(labelSubstring) == std::string::npos) continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    return std::strtod(line.c_str() + space + 1, nullptr);
  }
  return std::nullopt;
}

// The sum of every sample of `name` whose line contains `labelSubstring`.
inline double metricSum(std::string_view body, std::string_view name,
                        std::string_view labelSubstring = {}) {
  std::istringstream in{std::string(body)};
  std::string line;
  double sum = 0.0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    if (!labelSubstring.empty() && line.find(labelSubstring) == std::string::npos) continue;
    const auto space = line.rfind(' ');
    if (space != std::string::npos) sum += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

// `s` with ASCII letters lowered (HTTP field names are case-insensitive).
inline std::string asciiLower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// Number of `data: ` events in an SSE body, and whether it ended with `data: [DONE]`.
struct SseSummary {
  int events = 0;
  bool done = false;
};
inline SseSummary summarizeSse(std::string_view body) {
  SseSummary s;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string_view::npos) {
    if (body.substr(pos, 12) == "data: [DONE]") {
      s.done = true;
    } else {
      ++s.events;
    }
    pos += 6;
  }
  return s;
}

}  // namespace holdback_e2e
