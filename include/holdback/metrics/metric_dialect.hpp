// Metric dialects: how one model-server engine names the quantities holdback reads from its
// /metrics (the model-server protocol of the Go reference: queued requests and KV utilization as
// gauges, the names configurable per deployment). A dialect is data, not a code path: for each
// quantity an ordered list of sources, each a metric name with a label selector, an optional
// second series (used/total, or blocks x tokens per block) and a scale (percent or fraction).
//
//   const MetricDialect* d = detectMetricDialect(parsed);      // or findMetricDialect("sglang")
//   const DialectReading r = readMetricDialect(*d, parsed);
//   if (r.complete(*d)) { waiting = *r.get(DialectQuantity::kWaiting); ... }
//
// The quantities
//   kWaiting          requests queued in the engine (summed over every matching sample: one per
//                     model, engine or rank)
//   kRunning          requests running (summed)
//   kKvUsage          KV-cache utilization as a fraction 0..1 (the largest matching sample; a NaN
//                     wins so a detector sees invalid data; a used/total pair is sum(used) /
//                     sum(total))
//   kKvCapacityTokens KV-cache capacity in tokens, where the engine exports it (summed; a
//                     blocks x tokens-per-block pair is sum(blocks) x sum(tokens per block))
//   kSlots            the engine's concurrent-sequence limit, where it exports one (summed)
// A quantity's sources are tried in order; the first whose series (and second series) has at
// least one sample gives the value. A dialect's `required` quantities must all be readable for a
// scrape to count (kWaiting always is; kKvUsage too where the engine exports it).
//
// Built-in dialects (builtinMetricDialects(), in detection order; docs/guide/engines.md names the
// engines' documentation each comes from): vllm (v1 names), vllm-v0, sglang, llamacpp, tgi,
// trtllm (the Triton TensorRT-LLM backend).
//
// Detection (detectMetricDialect): of the built-in dialects whose required quantities a scrape
// can read, the one that reads the most quantities; ties go to the earlier dialect. nullptr when
// none matches; describeExposedMetrics then lists what the server did expose, for the log.
//
// Spec strings (parseMetricSource; the gateway's --metric-* flags and dialect files):
//   SERIES [ ('/' | '*') SERIES ] [ '%' ]
//   SERIES := name [ '{' label '=' value { ',' label '=' value } '}' ]
// with the value quoted ("v", escapes \\ \" \n) or bare (up to ',' or '}'), spaces allowed
// around tokens. '/' divides by the second series, '*' multiplies by it, a trailing '%' means
// the engine reports a percent (the value is scaled by 0.01).
//   sglang:num_queue_reqs
//   nv_trt_llm_request_metrics{request_type=waiting}
//   nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used"} /
//       nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"}
//
// Nothing here is on a hot path: reading a dialect walks the scrape's samples once per source
// and allocates nothing; parsing specs and dialect documents allocates. Bad input never throws.
//
// Thread safety: thread-safe (pure functions; the built-in table is immutable).
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/metrics/prometheus_parser.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

enum class DialectQuantity : std::uint8_t {
  kWaiting,
  kRunning,
  kKvUsage,
  kKvCapacityTokens,
  kSlots,
};
inline constexpr std::size_t kDialectQuantityCount = 5;

// "waiting", "running", "kvUsage", "kvCapacityTokens", "slots" (the dialect-file keys).
[[nodiscard]] HOLDBACK_API std::string_view toString(DialectQuantity q) noexcept;
// The inverse of toString; nullopt for any other name.
[[nodiscard]] HOLDBACK_API std::optional<DialectQuantity> dialectQuantityFromString(
    std::string_view name) noexcept;

// A metric name and a label selector: a sample matches when its name is `name` and it carries
// every label in `labels` with that value (other labels are ignored).
struct MetricSeries {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;

  [[nodiscard]] HOLDBACK_API bool matches(const PrometheusSample& s) const noexcept;
  // The spec form: name{a="x",b="y"} (no braces without labels).
  [[nodiscard]] HOLDBACK_API std::string toString() const;
};

// One way to read a quantity.
struct MetricSource {
  enum class Combine : std::uint8_t { kNone, kDivide, kMultiply };
  MetricSeries series;
  Combine combine = Combine::kNone;
  MetricSeries other;  // the divisor (kDivide) or the factor (kMultiply)
  double scale = 1.0;  // 0.01: the engine reports a percent

  // The spec form (parseMetricSource reads it back to an equal source).
  [[nodiscard]] HOLDBACK_API std::string toString() const;
};

struct MetricDialect {
  std::string name;
  // Per quantity (indexed by DialectQuantity), the sources in the order they are tried; empty:
  // the engine does not export the quantity.
  std::array<std::vector<MetricSource>, kDialectQuantityCount> sources;
  // Bit (1 << quantity) set: a scrape without this quantity does not count.
  std::uint32_t required = 1U << unsigned(DialectQuantity::kWaiting);

  [[nodiscard]] const std::vector<MetricSource>& of(DialectQuantity q) const noexcept {
    return sources[std::size_t(q)];
  }
  [[nodiscard]] bool needs(DialectQuantity q) const noexcept {
    return (required >> unsigned(q)) & 1U;
  }
};

// What one scrape gives through a dialect.
struct DialectReading {
  std::array<std::optional<double>, kDialectQuantityCount> values;
  // Per quantity, the index of the source that gave the value (meaningful when it has one).
  std::array<std::uint8_t, kDialectQuantityCount> sourceIndex{};

  [[nodiscard]] std::optional<double> get(DialectQuantity q) const noexcept {
    return values[std::size_t(q)];
  }
  // Every quantity `d` requires was read.
  [[nodiscard]] HOLDBACK_API bool complete(const MetricDialect& d) const noexcept;
  // How many quantities were read.
  [[nodiscard]] HOLDBACK_API std::size_t count() const noexcept;
};

// Reads every quantity of `d` from `metrics`. Does not allocate.
[[nodiscard]] HOLDBACK_API DialectReading readMetricDialect(const MetricDialect& d,
                                                            const ParsedPrometheusText& metrics);

// The built-in dialects, in detection order (vllm, vllm-v0, sglang, llamacpp, tgi, trtllm).
[[nodiscard]] HOLDBACK_API std::span<const MetricDialect> builtinMetricDialects();
// The built-in dialect called `name`, or nullptr.
[[nodiscard]] HOLDBACK_API const MetricDialect* findMetricDialect(std::string_view name);
// The built-in dialect that reads `metrics` best (see the file comment), or nullptr.
[[nodiscard]] HOLDBACK_API const MetricDialect* detectMetricDialect(
    const ParsedPrometheusText& metrics);

// For an endpoint that matches no dialect: its distinct metric names, sorted, at most `limit`
// of them, comma-separated ("... and N more" past the limit; "no samples" when empty).
[[nodiscard]] HOLDBACK_API std::string describeExposedMetrics(const ParsedPrometheusText& metrics,
                                                              std::size_t limit = 12);

// Every required quantity of `d` that `metrics` cannot read, as one message each:
// "<path>/<quantity>: none of <spec>; <spec> is in the scrape". `path` names where `d` was
// configured (a flag or a JSON path). Empty when the scrape reads every required quantity.
[[nodiscard]] HOLDBACK_API std::vector<std::string> checkMetricDialect(
    const MetricDialect& d, const ParsedPrometheusText& metrics, std::string_view path);

// Parses a spec string (see the file comment). On failure: nullopt and `error` (when given) says
// what is wrong and where ("at 14: expected '=' after label name").
[[nodiscard]] HOLDBACK_API std::optional<MetricSource> parseMetricSource(
    std::string_view spec, std::string* error = nullptr);

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/metric_dialect-inl.hpp"
#endif
