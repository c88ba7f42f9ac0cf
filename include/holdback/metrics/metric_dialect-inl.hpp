// Implementation of holdback/metrics/metric_dialect.hpp: compiled into libholdback by
// src/metrics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/metrics/metric_dialect.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "holdback/metrics/prometheus.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

inline constexpr std::string_view kDialectQuantityNames[kDialectQuantityCount] = {
    "waiting", "running", "kvUsage", "kvCapacityTokens", "slots"};

// Sum (or max, NaN winning) of the samples `series` matches; nullopt when none does.
HOLDBACK_INLINE std::optional<double> aggregateSeries(const MetricSeries& series,
                                                      const ParsedPrometheusText& metrics,
                                                      bool takeMax) noexcept {
  std::optional<double> out;
  for (const PrometheusSample& s : metrics.samples) {
    if (!series.matches(s)) continue;
    if (!out) {
      out = s.value;
    } else if (!takeMax) {
      *out += s.value;
    } else if (std::isnan(s.value) || s.value > *out) {
      if (!std::isnan(*out)) out = s.value;
    }
  }
  return out;
}

HOLDBACK_INLINE std::optional<double> readSource(const MetricSource& src,
                                                 const ParsedPrometheusText& metrics,
                                                 bool takeMax) noexcept {
  using Combine = MetricSource::Combine;
  // A pair is summed on both sides (used/total), or blocks summed times the largest factor.
  const bool pair = src.combine != Combine::kNone;
  const std::optional<double> v = aggregateSeries(src.series, metrics, takeMax && !pair);
  if (!v) return std::nullopt;
  double value = *v;
  if (pair) {
    const std::optional<double> o =
        aggregateSeries(src.other, metrics, src.combine == Combine::kMultiply);
    if (!o) return std::nullopt;
    value = src.combine == Combine::kDivide ? value / *o : value * *o;
  }
  return value * src.scale;
}

// A cursor over a spec string, for parseMetricSource.
class SpecCursor {
 public:
  explicit SpecCursor(std::string_view s) : s_(s) {}
  void skipSpaces() noexcept {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool done() noexcept {
    skipSpaces();
    return i_ >= s_.size();
  }
  bool consume(char c) noexcept {
    skipSpaces();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  std::string_view name(bool label) noexcept {
    skipSpaces();
    const std::size_t start = i_;
    auto ok = [label](char c, bool first) {
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      return alpha || (!label && c == ':') || (!first && c >= '0' && c <= '9');
    };
    while (i_ < s_.size() && ok(s_[i_], i_ == start)) ++i_;
    return s_.substr(start, i_ - start);
  }
  // A quoted value with escapes, or a bare one up to ',' or '}' (trailing spaces dropped).
  bool value(std::string& out) {
    skipSpaces();
    if (i_ < s_.size() && s_[i_] == '"') {
      for (++i_; i_ < s_.size(); ++i_) {
        char c = s_[i_];
        if (c == '"') {
          ++i_;
          return true;
        }
        if (c == '\\' && i_ + 1 < s_.size()) {
          c = s_[++i_];
          if (c == 'n') c = '\n';
        }
        out += c;
      }
      return false;
    }
    const std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}') ++i_;
    std::string_view v = s_.substr(start, i_ - start);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    out.assign(v);
    return !v.empty();
  }
  std::size_t pos() const noexcept { return i_; }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

HOLDBACK_INLINE bool parseSeries(SpecCursor& cur, MetricSeries& out, std::string& error) {
  out.name = cur.name(false);
  if (out.name.empty()) {
    error = "at " + std::to_string(cur.pos()) + ": expected a metric name";
    return false;
  }
  if (!cur.consume('{')) return true;
  if (cur.consume('}')) return true;
  for (;;) {
    const std::string_view key = cur.name(true);
    if (key.empty()) {
      error = "at " + std::to_string(cur.pos()) + ": expected a label name";
      return false;
    }
    if (!cur.consume('=')) {
      error = "at " + std::to_string(cur.pos()) + ": expected '=' after label name";
      return false;
    }
    std::string value;
    if (!cur.value(value)) {
      error = "at " + std::to_string(cur.pos()) + ": expected a label value";
      return false;
    }
    out.labels.emplace_back(std::string(key), std::move(value));
    if (cur.consume('}')) return true;
    if (!cur.consume(',')) {
      error = "at " + std::to_string(cur.pos()) + ": expected ',' or '}'";
      return false;
    }
    if (cur.consume('}')) return true;  // a trailing comma
  }
}

HOLDBACK_INLINE MetricDialect
makeDialect(std::string name, std::initializer_list<std::pair<DialectQuantity, const char*>> specs,
            std::initializer_list<DialectQuantity> required) {
  MetricDialect d;
  d.name = std::move(name);
  for (const auto& [q, spec] : specs) {
    // The built-in specs are constants; a typo in one is caught by the unit tests, which read
    // every built-in dialect back through toString().
    if (auto src = parseMetricSource(spec)) d.sources[std::size_t(q)].push_back(std::move(*src));
  }
  d.required = 0;
  for (const DialectQuantity q : required) d.required |= 1U << unsigned(q);
  return d;
}

HOLDBACK_INLINE std::vector<MetricDialect> makeBuiltinDialects() {
  using Q = DialectQuantity;
  std::vector<MetricDialect> out;
  // vLLM v1 (also served by later v0 releases); the "_perc" gauges are fractions 0..1.
  out.push_back(makeDialect("vllm",
                            {{Q::kWaiting, "vllm:num_requests_waiting"},
                             {Q::kRunning, "vllm:num_requests_running"},
                             {Q::kKvUsage, "vllm:kv_cache_usage_perc"}},
                            {Q::kWaiting, Q::kKvUsage}));
  out.push_back(makeDialect("vllm-v0",
                            {{Q::kWaiting, "vllm:num_requests_waiting"},
                             {Q::kRunning, "vllm:num_requests_running"},
                             {Q::kKvUsage, "vllm:gpu_cache_usage_perc"}},
                            {Q::kWaiting, Q::kKvUsage}));
  // SGLang (--enable-metrics); newer releases spell the prefix "sglang_".
  out.push_back(makeDialect("sglang",
                            {{Q::kWaiting, "sglang:num_queue_reqs"},
                             {Q::kWaiting, "sglang_num_queue_reqs"},
                             {Q::kRunning, "sglang:num_running_reqs"},
                             {Q::kRunning, "sglang_num_running_reqs"},
                             {Q::kKvUsage, "sglang:token_usage"},
                             {Q::kKvUsage, "sglang_token_usage"},
                             {Q::kKvCapacityTokens, "sglang:max_total_num_tokens"},
                             {Q::kKvCapacityTokens, "sglang_max_total_num_tokens"}},
                            {Q::kWaiting, Q::kKvUsage}));
  // llama.cpp server (--metrics): deferred requests wait for a free slot. Some releases do not
  // export the KV ratio, so it is read where present and not required.
  out.push_back(makeDialect("llamacpp",
                            {{Q::kWaiting, "llamacpp:requests_deferred"},
                             {Q::kRunning, "llamacpp:requests_processing"},
                             {Q::kKvUsage, "llamacpp:kv_cache_usage_ratio"}},
                            {Q::kWaiting}));
  // Hugging Face TGI: no KV-cache gauge at all.
  out.push_back(
      makeDialect("tgi", {{Q::kWaiting, "tgi_queue_size"}, {Q::kRunning, "tgi_batch_current_size"}},
                  {Q::kWaiting}));
  // Triton's TensorRT-LLM backend: the inflight batcher's request and KV-block gauges.
  out.push_back(makeDialect(
      "trtllm",
      {{Q::kWaiting, "nv_trt_llm_request_metrics{request_type=\"waiting\"}"},
       {Q::kWaiting, "nv_inference_pending_request_count"},
       {Q::kRunning, "nv_trt_llm_request_metrics{request_type=\"scheduled\"}"},
       {Q::kRunning, "nv_trt_llm_request_metrics{request_type=\"active\"}"},
       {Q::kKvUsage, "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\"}"},
       {Q::kKvUsage,
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\"} / "
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\"}"},
       {Q::kKvCapacityTokens,
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\"} * "
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\"}"},
       {Q::kSlots, "nv_trt_llm_request_metrics{request_type=\"max\"}"}},
      {Q::kWaiting, Q::kKvUsage}));
  return out;
}

HOLDBACK_INLINE void appendSeriesSpec(const MetricSeries& s, std::string& out) {
  out += s.name;
  if (s.labels.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    if (i > 0) out += ',';
    out += s.labels[i].first;
    out += "=\"";
    out += escapeLabelValue(s.labels[i].second);
    out += '"';
  }
  out += '}';
}

}  // namespace detail

HOLDBACK_INLINE std::string_view toString(DialectQuantity q) noexcept {
  const auto i = std::size_t(q);
  return i < kDialectQuantityCount ? detail::kDialectQuantityNames[i] : "unknown";
}

HOLDBACK_INLINE std::optional<DialectQuantity> dialectQuantityFromString(
    std::string_view name) noexcept {
  for (std::size_t i = 0; i < kDialectQuantityCount; ++i) {
    if (detail::kDialectQuantityNames[i] == name) return DialectQuantity(i);
  }
  return std::nullopt;
}

HOLDBACK_INLINE bool MetricSeries::matches(const PrometheusSample& s) const noexcept {
  if (s.name != name) return false;
  for (const auto& [key, value] : labels) {
    const std::optional<std::string_view> v = s.label(key);
    if (!v || *v != value) return false;
  }
  return true;
}

HOLDBACK_INLINE std::string MetricSeries::toString() const {
  std::string out;
  detail::appendSeriesSpec(*this, out);
  return out;
}

HOLDBACK_INLINE std::string MetricSource::toString() const {
  std::string out;
  detail::appendSeriesSpec(series, out);
  if (combine != Combine::kNone) {
    out += combine == Combine::kDivide ? " / " : " * ";
    detail::appendSeriesSpec(other, out);
  }
  if (scale != 1.0) out += " %";
  return out;
}

HOLDBACK_INLINE bool DialectReading::complete(const MetricDialect& d) const noexcept {
  for (std::size_t i = 0; i < kDialectQuantityCount; ++i) {
    if (d.needs(DialectQuantity(i)) && !values[i]) return false;
  }
  return true;
}

HOLDBACK_INLINE std::size_t DialectReading::count() const noexcept {
  return std::size_t(std::count_if(values.begin(), values.end(),
                                   [](const std::optional<double>& v) { return v.has_value(); }));
}

HOLDBACK_INLINE DialectReading readMetricDialect(const MetricDialect& d,
                                                 const ParsedPrometheusText& metrics) {
  DialectReading r;
  for (std::size_t q = 0; q < kDialectQuantityCount; ++q) {
    const bool takeMax = DialectQuantity(q) == DialectQuantity::kKvUsage;
    const std::vector<MetricSource>& sources = d.sources[q];
    for (std::size_t i = 0; i < sources.size(); ++i) {
      if (auto v = detail::readSource(sources[i], metrics, takeMax)) {
        r.values[q] = v;
        r.sourceIndex[q] = std::uint8_t(std::min<std::size_t>(i, 255));
        break;
      }
    }
  }
  return r;
}

HOLDBACK_INLINE std::span<const MetricDialect> builtinMetricDialects() {
  static const std::vector<MetricDialect> dialects = detail::makeBuiltinDialects();
  return dialects;
}

HOLDBACK_INLINE const MetricDialect* findMetricDialect(std::string_view name) {
  for (const MetricDialect& d : builtinMetricDialects()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

HOLDBACK_INLINE const MetricDialect* detectMetricDialect(const ParsedPrometheusText& metrics) {
  const MetricDialect* best = nullptr;
  std::size_t best_count = 0;
  for (const MetricDialect& d : builtinMetricDialects()) {
    const DialectReading r = readMetricDialect(d, metrics);
    if (r.complete(d) && r.count() > best_count) {
      best = &d;
      best_count = r.count();
    }
  }
  return best;
}

HOLDBACK_INLINE std::string describeExposedMetrics(const ParsedPrometheusText& metrics,
                                                   std::size_t limit) {
  std::vector<std::string_view> names;
  names.reserve(metrics.samples.size());
  for (const PrometheusSample& s : metrics.samples) names.push_back(s.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.empty()) return "no samples";
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

HOLDBACK_INLINE std::vector<std::string> checkMetricDialect(const MetricDialect& d,
                                                            const ParsedPrometheusText& metrics,
                                                            std::string_view path) {
  std::vector<std::string> errors;
  const DialectReading r = readMetricDialect(d, metrics);
  for (std::size_t q = 0; q < kDialectQuantityCount; ++q) {
    if (!d.needs(DialectQuantity(q)) || r.values[q]) continue;
    std::string msg = std::string(path) + "/" + std::string(toString(DialectQuantity(q))) + ": ";
    if (d.sources[q].empty()) {
      msg += "required but no metric is named for it";
    } else {
      msg += "none of ";
      for (std::size_t i = 0; i < d.sources[q].size(); ++i) {
        if (i > 0) msg += "; ";
        msg += d.sources[q][i].toString();
      }
      msg += " is in the scrape";
    }
    errors.push_back(std::move(msg));
  }
  return errors;
}

HOLDBACK_INLINE std::optional<MetricSource> parseMetricSource(std::string_view spec,
                                                              std::string* error) {
  std::string err;
  MetricSource src;
  detail::SpecCursor cur(spec);
  bool ok = detail::parseSeries(cur, src.series, err);
  if (ok && cur.consume('/')) {
    src.combine = MetricSource::Combine::kDivide;
    ok = detail::parseSeries(cur, src.other, err);
  } else if (ok && cur.consume('*')) {
    src.combine = MetricSource::Combine::kMultiply;
    ok = detail::parseSeries(cur, src.other, err);
  }
  if (ok && cur.consume('%')) src.scale = 0.01;
  if (ok && !cur.done()) {
    err = "at " + std::to_string(cur.pos()) + ": unexpected text after the metric";
    ok = false;
  }
  if (!ok) {
    if (error) *error = "\"" + std::string(spec) + "\" " + err;
    return std::nullopt;
  }
  return src;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
