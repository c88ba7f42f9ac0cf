// Prometheus text exposition (format version 0.0.4): one writer for the library, the example
// gateway and the example model server, and the flow controller's metrics rendered with it.
//
//   PrometheusWriter       families (# HELP / # TYPE), samples with labels, histograms
//   escapeLabelValue       \ -> \\, " -> \", newline -> \n (the exposition format's three escapes),
//                          ill-formed UTF-8 -> U+FFFD
//   formatSampleValue      shortest round-trip decimal; NaN, +Inf, -Inf
//   renderPrometheus       FlowControllerStats as metrics (names of the reference §3.12)
// The parser of the same format is in holdback/metrics/prometheus_parser.hpp.
//
// Thread safety: PrometheusWriter is thread-compatible (one writer per rendering); the free
// functions are thread-safe.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/flow/flow_controller.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// A label value with the exposition format's escapes: backslash, double quote and line feed;
// bytes that are not well-formed UTF-8 become U+FFFD (toValidUtf8), so that no value can make a
// scraper reject the text.
[[nodiscard]] HOLDBACK_API std::string escapeLabelValue(std::string_view value);

// A sample value: the shortest decimal that round-trips ("0.25", "3", "1e-07"), "NaN", "+Inf",
// "-Inf".
[[nodiscard]] HOLDBACK_API std::string formatSampleValue(double value);

class HOLDBACK_API PrometheusWriter {
 public:
  // One label: name (written as given; it must be a valid label name) and value (escaped).
  using Label = std::pair<std::string_view, std::string_view>;

  // `prefix` is prepended to every metric name ("holdback_"); `constLabels` are appended to every
  // sample's labels (inference_pool="default").
  explicit PrometheusWriter(std::string prefix = {},
                            std::vector<std::pair<std::string, std::string>> constLabels = {});

  // "# HELP <name> <help>" (help with \ and newline escaped) and "# TYPE <name> <type>".
  void family(std::string_view name, std::string_view type, std::string_view help);

  // "<name>{labels} <value>"; no braces when there are no labels at all.
  void sample(std::string_view name, std::span<const Label> labels, double value);
  void sample(std::string_view name, std::initializer_list<Label> labels, double value) {
    sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }
  // Integer samples (counters, counts) are written exactly, also beyond 2^53.
  void sample(std::string_view name, std::span<const Label> labels, std::uint64_t value);
  void sample(std::string_view name, std::initializer_list<Label> labels, std::uint64_t value) {
    sample(name, std::span<const Label>(labels.begin(), labels.size()), value);
  }

  // A histogram's samples (the family is written separately): <name>_bucket with le="<bound>"
  // after `labels` and cumulative counts, a last bucket le="+Inf", then <name>_sum and
  // <name>_count. `counts` holds the per-bucket (not cumulative) counts, one more than
  // `upperBounds` (the last is the overflow bucket); missing entries count as 0.
  void histogram(std::string_view name, std::span<const Label> labels,
                 std::span<const double> upperBounds, std::span<const std::uint64_t> counts,
                 double sum);

  [[nodiscard]] const std::string& text() const noexcept { return out_; }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  void write(std::string_view name, std::span<const Label> labels, std::string_view extraName,
             std::string_view extraValue, std::string_view value);

  std::string prefix_;
  std::string const_labels_;  // `,name="escaped"...` with the leading comma
  std::string out_;
};

// The `outcome` label of flow_control_requests_total as upstream spells it (#1636): toString(),
// except kEvictedCancelled -> "EvictedContextCancelled".
[[nodiscard]] HOLDBACK_API std::string_view prometheusOutcomeLabel(QueueOutcome outcome) noexcept;

// The outcome counts by requested priority, as flow_control_requests_total labels them (upstream
// llm-d-router #1636, https://github.com/llm-d/llm-d-router): each band's outcomes less the
// requested-priority parts it tracks (BandStats::requestedOutcomes), which go to their requested
// priority instead; the untracked ones (beyond kRequestedPriorityLabelLimit) stay under their
// band's priority. Highest priority first; every band's priority is present. The sums over all
// priorities equal the bands' sums.
[[nodiscard]] HOLDBACK_API
    std::vector<std::pair<Priority, std::array<std::uint64_t, kNumQueueOutcomes>>>
    requestedPriorityOutcomes(const FlowControllerStats& stats);

// Prometheus text exposition (version 0.0.4) of a snapshot, metric names of the reference §3.12
// with the prefix holdback_ instead of llm_d_epp_. `pool` is the inference_pool label value.
[[nodiscard]] HOLDBACK_API std::string renderPrometheus(const FlowControllerStats& stats,
                                                        std::string_view pool = "default");

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/prometheus-inl.hpp"
#endif
