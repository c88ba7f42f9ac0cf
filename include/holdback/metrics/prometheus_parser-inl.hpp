// Implementation of holdback/metrics/prometheus_parser.hpp: compiled into libholdback by
// src/metrics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/metrics/prometheus_parser.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <system_error>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE bool isMetricNameStart(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
HOLDBACK_INLINE bool isMetricNameChar(char c) noexcept {
  return isMetricNameStart(c) || (c >= '0' && c <= '9');
}
HOLDBACK_INLINE bool isLabelNameStart(char c) noexcept {
  return isMetricNameStart(c) && c != ':';
}
HOLDBACK_INLINE bool isLabelNameChar(char c) noexcept {
  return isMetricNameChar(c) && c != ':';
}
HOLDBACK_INLINE bool isPrometheusSpace(char c) noexcept {
  return c == ' ' || c == '\t';
}

HOLDBACK_INLINE bool equalsIgnoreCase(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

// A cursor over one line.
class PrometheusCursor {
 public:
  explicit PrometheusCursor(std::string_view s) : s_(s) {}
  bool done() const noexcept { return i_ >= s_.size(); }
  char peek() const noexcept { return done() ? '\0' : s_[i_]; }
  // True when at least one space was skipped.
  bool skipSpaces() noexcept {
    const std::size_t start = i_;
    while (!done() && isPrometheusSpace(s_[i_])) ++i_;
    return i_ != start;
  }
  bool consume(char c) noexcept {
    if (peek() != c || done()) return false;
    ++i_;
    return true;
  }
  // The longest run of characters accepted by `first`/`rest`; empty when the first is rejected.
  template <typename First, typename Rest>
  std::string_view identifier(First first, Rest rest) noexcept {
    if (done() || !first(s_[i_])) return {};
    const std::size_t start = i_++;
    while (!done() && rest(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  // A run up to the next space (or the end).
  std::string_view token() noexcept {
    const std::size_t start = i_;
    while (!done() && !isPrometheusSpace(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  // A double-quoted label value with escapes; false when unterminated.
  HOLDBACK_INLINE bool quoted(std::string& out) {
    if (!consume('"')) return false;
    while (!done()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c == '\\' && !done()) {
        const char e = s_[i_++];
        if (e == 'n') {
          out += '\n';
        } else if (e == '\\' || e == '"') {
          out += e;
        } else {
          out += '\\';
          out += e;
        }
        continue;
      }
      out += c;
    }
    return false;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

HOLDBACK_INLINE bool parsePrometheusLabels(
    PrometheusCursor& cur, std::vector<std::pair<std::string, std::string>>& labels) {
  // Called after '{'.
  for (;;) {
    cur.skipSpaces();
    if (cur.consume('}')) return true;
    const std::string_view key = cur.identifier(isLabelNameStart, isLabelNameChar);
    if (key.empty()) return false;
    cur.skipSpaces();
    if (!cur.consume('=')) return false;
    cur.skipSpaces();
    std::string value;
    if (!cur.quoted(value)) return false;
    labels.emplace_back(std::string(key), std::move(value));
    cur.skipSpaces();
    if (cur.consume(',')) continue;
    return cur.consume('}');
  }
}

HOLDBACK_INLINE std::optional<std::int64_t> parsePrometheusTimestamp(
    std::string_view token) noexcept {
  std::int64_t v = 0;
  const char* first = token.data();
  const char* last = token.data() + token.size();
  if (first != last && *first == '+') ++first;
  auto [end, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || end != last || first == last) return std::nullopt;
  return v;
}

// For a decimal literal (digits, at most one '.', an optional exponent) that from_chars found
// out of range: true when its magnitude is below 1 (so it underflowed), false when at least 1
// (overflow). The decimal exponent of its first nonzero digit plus the written exponent, the
// latter saturated.
HOLDBACK_INLINE bool decimalUnderflows(std::string_view literal) noexcept {
  const std::size_t e = literal.find_first_of("eE");
  const std::string_view mantissa = literal.substr(0, e);
  std::int64_t written = 0;
  if (e != std::string_view::npos) {
    std::string_view exponent = literal.substr(e + 1);
    bool minus = false;
    if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-')) {
      minus = exponent.front() == '-';
      exponent.remove_prefix(1);
    }
    for (const char c : exponent) {
      if (c >= '0' && c <= '9') written = std::min<std::int64_t>(written * 10 + (c - '0'), 1 << 30);
    }
    if (minus) written = -written;
  }
  const std::size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::size_t firstWhole = whole.find_first_not_of('0');
  std::int64_t magnitude = 0;
  if (firstWhole != std::string_view::npos) {
    magnitude = static_cast<std::int64_t>(whole.size() - firstWhole) - 1;
  } else if (dot != std::string_view::npos) {
    const std::size_t firstFraction = mantissa.substr(dot + 1).find_first_not_of('0');
    // All zeros cannot be out of range; treat it as underflow (the value is 0).
    magnitude = firstFraction == std::string_view::npos
                    ? -1
                    : -static_cast<std::int64_t>(firstFraction) - 1;
  } else {
    magnitude = -1;
  }
  return magnitude + written < 0;
}

}  // namespace detail

HOLDBACK_INLINE std::optional<std::string_view> PrometheusSample::label(
    std::string_view key) const noexcept {
  for (const auto& [k, v] : labels) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

HOLDBACK_INLINE std::optional<double> parsePrometheusValue(std::string_view token) noexcept {
  if (token.empty()) return std::nullopt;
  bool negative = false;
  std::string_view body = token;
  if (body.front() == '+' || body.front() == '-') {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  if (detail::equalsIgnoreCase(body, "inf") || detail::equalsIgnoreCase(body, "infinity")) {
    const double inf = std::numeric_limits<double>::infinity();
    return negative ? -inf : inf;
  }
  if (detail::equalsIgnoreCase(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  // Only digits, '.', exponents and a sign after 'e' from here on: from_chars also reads
  // "nan(chars)", "infinit..." prefixes and the like, which Go's strconv.ParseFloat (and so
  // Prometheus) rejects.
  if (body.empty() || body.front() == '+' || body.front() == '-') return std::nullopt;
  const bool numeric = std::all_of(body.begin(), body.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
  });
  if (!numeric) return std::nullopt;
  double v = 0.0;
  auto [end, ec] =
      std::from_chars(body.data(), body.data() + body.size(), v, std::chars_format::general);
  if (end != body.data() + body.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Go's ParseFloat reads a value too small for a double as 0 (no error) and one too large as
    // an error; from_chars reports both as out of range.
    if (!detail::decimalUnderflows(body)) return std::nullopt;
    v = 0.0;
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return negative ? -v : v;
}

HOLDBACK_INLINE std::optional<PrometheusSample> parsePrometheusSampleLine(std::string_view line) {
  detail::PrometheusCursor cur(line);
  cur.skipSpaces();
  PrometheusSample sample;
  const std::string_view name = cur.identifier(detail::isMetricNameStart, detail::isMetricNameChar);
  if (name.empty()) return std::nullopt;
  sample.name = std::string(name);
  bool spaced = cur.skipSpaces();
  if (cur.consume('{')) {
    if (!detail::parsePrometheusLabels(cur, sample.labels)) return std::nullopt;
    spaced = cur.skipSpaces();
  }
  if (!spaced) return std::nullopt;  // the value is separated by white space
  const auto value = parsePrometheusValue(cur.token());
  if (!value) return std::nullopt;
  sample.value = *value;
  cur.skipSpaces();
  if (!cur.done()) {
    const auto ts = detail::parsePrometheusTimestamp(cur.token());
    if (!ts) return std::nullopt;
    sample.timestampMs = *ts;
    cur.skipSpaces();
    if (!cur.done()) return std::nullopt;
  }
  return sample;
}

HOLDBACK_INLINE ParsedPrometheusText parsePrometheusText(std::string_view text) {
  ParsedPrometheusText out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t first = 0;
    while (first < line.size() && detail::isPrometheusSpace(line[first])) ++first;
    if (first == line.size()) continue;
    if (line[first] == '#') {
      ++out.commentLines;
      continue;
    }
    if (auto sample = parsePrometheusSampleLine(line)) {
      out.samples.push_back(std::move(*sample));
    } else {
      ++out.skippedLines;
    }
  }
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
