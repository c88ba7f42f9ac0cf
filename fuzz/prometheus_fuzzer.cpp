// The Prometheus text parser (holdback/metrics/prometheus_parser.hpp) under arbitrary bytes: the
// example gateway feeds it every model server's /metrics body, which is untrusted input. Checks:
//   - every non-blank line is counted exactly once: samples + commentLines + skippedLines equals
//     the non-blank lines (LF or CRLF ends), comments are exactly the lines whose first non-space
//     character is '#', and each other line is a sample exactly when parsePrometheusSampleLine
//     accepts it alone (the two entry points agree, in order);
//   - every sample's metric and label names match the grammar;
//   - a sample written back in canonical form (escaped label values, the value with 17
//     significant digits or NaN / +Inf / -Inf, the timestamp) parses to the same sample;
//   - parsePrometheusValue agrees with the C library: for a token of digits, '.', 'e', signs, it
//     accepts exactly what strtod (C locale) reads whole without overflow, with the same value
//     (an underflow reads as strtod's 0 or subnormal), and no other spelling than those and
//     the inf / infinity / nan words is accepted;
//   - the metric dialects (holdback/metrics/metric_dialect.hpp) over the same text: a detected
//     dialect reads every quantity it requires; a quantity read from a plain source (no pair, no
//     scale) is the sum of its matching samples (the largest, NaN winning, for the KV fraction),
//     recomputed here; every line taken as a spec string either fails with a message or prints
//     back to a spec that parses to the same text.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "holdback/metrics/metric_dialect.hpp"
#include "holdback/metrics/prometheus_parser.hpp"

namespace {

using namespace holdback;
using holdback::fuzz::require;

bool isSpace(char c) {
  return c == ' ' || c == '\t';
}

bool validName(std::string_view n, bool label) {
  if (n.empty()) return false;
  const auto start = [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
  };
  if (!start(n[0])) return false;
  for (const char c : n.substr(1)) {
    if (!start(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool sameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

std::string canonical(const PrometheusSample& s) {
  std::string out = s.name;
  if (!s.labels.empty()) {
    out += '{';
    for (std::size_t i = 0; i < s.labels.size(); ++i) {
      if (i > 0) out += ',';
      out += s.labels[i].first;
      out += "=\"";
      for (const char c : s.labels[i].second) {
        if (c == '\\' || c == '"') {
          out += '\\';
          out += c;
        } else if (c == '\n') {
          out += "\\n";
        } else {
          out += c;
        }
      }
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  if (std::isnan(s.value)) {
    out += "NaN";
  } else if (std::isinf(s.value)) {
    out += s.value > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", s.value);
    out += buf;
  }
  if (s.timestampMs) out += ' ' + std::to_string(*s.timestampMs);
  return out;
}

bool sameSample(const PrometheusSample& a, const PrometheusSample& b) {
  return a.name == b.name && a.labels == b.labels && sameValue(a.value, b.value) &&
         a.timestampMs == b.timestampMs;
}

bool caseInsensitiveEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

void checkValue(std::string_view token) {
  const std::optional<double> v = parsePrometheusValue(token);
  std::string_view body = token;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  const bool word = caseInsensitiveEquals(body, "inf") || caseInsensitiveEquals(body, "infinity") ||
                    caseInsensitiveEquals(body, "nan");
  if (word) {
    require(v.has_value(), "an inf / nan word is a value");
    return;
  }
  bool numeric = !body.empty() && body[0] != '+' && body[0] != '-';
  for (const char c : body) {
    numeric = numeric &&
              ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-');
  }
  if (!numeric) {
    require(!v.has_value(), "only digits, '.', exponents and signs make a number");
    return;
  }
  const std::string text(token);
  char* end = nullptr;
  errno = 0;
  const double expected = std::strtod(text.c_str(), &end);
  const bool whole = end == text.c_str() + text.size();
  const bool overflow = errno == ERANGE && std::isinf(expected);
  require(v.has_value() == (whole && !overflow), "accepted exactly when strtod reads it whole");
  if (v) require(sameValue(*v, expected), "the value strtod reads");
}

void checkDialects(std::string_view text, const ParsedPrometheusText& parsed) {
  if (const MetricDialect* d = detectMetricDialect(parsed)) {
    require(readMetricDialect(*d, parsed).complete(*d), "a detected dialect reads what it needs");
  }
  for (const MetricDialect& d : builtinMetricDialects()) {
    const DialectReading r = readMetricDialect(d, parsed);
    require(r.complete(d) == checkMetricDialect(d, parsed, "/d").empty(),
            "checkMetricDialect reports exactly the missing required quantities");
    for (std::size_t q = 0; q < kDialectQuantityCount; ++q) {
      if (!r.values[q]) continue;
      const MetricSource& src = d.sources[q][r.sourceIndex[q]];
      if (src.combine != MetricSource::Combine::kNone || src.scale != 1.0) continue;
      const bool takeMax = DialectQuantity(q) == DialectQuantity::kKvUsage;
      double expected = 0.0;
      bool any = false;
      for (const PrometheusSample& s : parsed.samples) {
        if (!src.series.matches(s)) continue;
        if (!any || !takeMax) {
          expected = any ? expected + s.value : s.value;
        } else if (!std::isnan(expected) && (std::isnan(s.value) || s.value > expected)) {
          expected = s.value;
        }
        any = true;
      }
      require(any, "a read quantity has a matching sample");
      require(sameValue(*r.values[q], expected), "a plain source reads the sum (or the max)");
    }
  }
  (void)describeExposedMetrics(parsed);
  // Each line (bounded) as a spec string.
  std::string_view rest = text;
  for (int n = 0; n < 8 && !rest.empty(); ++n) {
    const std::size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, std::min<std::size_t>(nl, 256));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    std::string error;
    const std::optional<MetricSource> src = parseMetricSource(line, &error);
    require(src.has_value() != !error.empty(), "a spec parses or says why not");
    if (!src) continue;
    const std::optional<MetricSource> again = parseMetricSource(src->toString());
    require(again.has_value(), "a spec's printed form parses");
    require(again->toString() == src->toString(), "a spec's printed form is stable");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ParsedPrometheusText parsed = parsePrometheusText(text);

  // Line accounting, and the one-line entry point agreeing with the whole-text one.
  std::size_t nonBlank = 0;
  std::size_t comments = 0;
  std::size_t next = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && isSpace(line[first])) ++first;
    if (first == line.size()) continue;
    ++nonBlank;
    if (line[first] == '#') {
      ++comments;
      continue;
    }
    const std::optional<PrometheusSample> alone = parsePrometheusSampleLine(line);
    if (alone) {
      require(next < parsed.samples.size(), "a sample line gives a sample");
      require(sameSample(*alone, parsed.samples[next]), "both entry points read the same sample");
      ++next;
    }
    // The value and timestamp tokens of every line, whatever the line's fate.
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && isSpace(line[i])) ++i;
      const std::size_t start = i;
      while (i < line.size() && !isSpace(line[i])) ++i;
      if (i > start && i - start <= 512) checkValue(line.substr(start, i - start));
    }
  }
  require(next == parsed.samples.size(), "no sample without a sample line");
  require(parsed.commentLines == comments, "comment lines counted");
  require(parsed.samples.size() + parsed.commentLines + parsed.skippedLines == nonBlank,
          "every non-blank line counted once");

  for (const PrometheusSample& s : parsed.samples) {
    require(validName(s.name, false), "metric name matches the grammar");
    for (const auto& [key, value] : s.labels) require(validName(key, true), "label name valid");
    const std::optional<PrometheusSample> again = parsePrometheusSampleLine(canonical(s));
    require(again.has_value(), "a sample's canonical form parses");
    require(sameSample(*again, s), "a sample's canonical form parses to the same sample");
  }
  checkDialects(text, parsed);
  return 0;
}
