// A small parser for the Prometheus text exposition format (version 0.0.4), enough to read a
// model server's /metrics (the example gateway's telemetry scraper uses it). The writer is in
// holdback/metrics/prometheus.hpp.
//
// What it accepts, line by line (LF or CRLF line ends):
//   blank lines                      ignored
//   "# HELP ..." / "# TYPE ..." / "# anything"   comments, counted and otherwise ignored
//   name[{label="value",...}] value [timestamp]
//     name       [a-zA-Z_:][a-zA-Z0-9_:]*
//     labels     label names [a-zA-Z_][a-zA-Z0-9_]*; values in double quotes with the escapes
//                \\ \" and \n (any other backslash sequence is kept as written, as Prometheus
//                does); a trailing comma and spaces around tokens are allowed
//     value      a float as Go's strconv.ParseFloat reads it: decimal or exponent forms, NaN,
//                +Inf, -Inf, Inf (case-insensitive)
//     timestamp  an optional integer (milliseconds since the epoch; may be negative)
// Anything else (a bad name, an unterminated label value, a missing or malformed value, a
// non-integer timestamp, trailing garbage) makes the whole line skipped and counted; parsing never
// stops at a bad line and never throws.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct PrometheusSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order written
  double value = 0.0;
  std::optional<std::int64_t> timestampMs;

  // The value of label `key`, or nullopt.
  [[nodiscard]] HOLDBACK_API std::optional<std::string_view> label(
      std::string_view key) const noexcept;
};

struct ParsedPrometheusText {
  std::vector<PrometheusSample> samples;
  std::size_t commentLines = 0;
  // Lines that were neither blank, comments nor valid samples.
  std::size_t skippedLines = 0;
};

[[nodiscard]] HOLDBACK_API ParsedPrometheusText parsePrometheusText(std::string_view text);

// Parses one sample line (no line end). nullopt when it is not a valid sample.
[[nodiscard]] HOLDBACK_API std::optional<PrometheusSample> parsePrometheusSampleLine(
    std::string_view line);

// Parses a sample value as described above; nullopt when `token` is not one.
[[nodiscard]] HOLDBACK_API std::optional<double> parsePrometheusValue(
    std::string_view token) noexcept;

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/prometheus_parser-inl.hpp"
#endif
