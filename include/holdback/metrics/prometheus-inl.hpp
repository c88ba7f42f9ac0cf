// Implementation of holdback/metrics/prometheus.hpp: compiled into libholdback by src/metrics.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/metrics/prometheus.hpp"

#include "holdback/core/text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <system_error>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string escapeLabelValue(std::string_view value) {
  // The exposition format's label values are UTF-8: one ill-formed byte makes a scraper reject
  // the whole text, so ill-formed bytes become U+FFFD (well-formed text is not copied for it).
  std::string valid;
  if (!isValidUtf8(value)) {
    valid = toValidUtf8(value);
    value = valid;
  }
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

HOLDBACK_INLINE std::string formatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

HOLDBACK_INLINE PrometheusWriter::PrometheusWriter(
    std::string prefix, std::vector<std::pair<std::string, std::string>> constLabels)
    : prefix_(std::move(prefix)) {
  for (const auto& [name, value] : constLabels) {
    const_labels_ += ',';
    const_labels_ += name;
    const_labels_ += "=\"";
    const_labels_ += escapeLabelValue(value);
    const_labels_ += '"';
  }
}

HOLDBACK_INLINE void PrometheusWriter::family(std::string_view name, std::string_view type,
                                              std::string_view help) {
  out_ += "# HELP ";
  out_ += prefix_;
  out_ += name;
  out_ += ' ';
  for (const char c : help) {
    if (c == '\\') {
      out_ += "\\\\";
    } else if (c == '\n') {
      out_ += "\\n";
    } else {
      out_ += c;
    }
  }
  out_ += "\n# TYPE ";
  out_ += prefix_;
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

HOLDBACK_INLINE void PrometheusWriter::write(std::string_view name, std::span<const Label> labels,
                                             std::string_view extraName,
                                             std::string_view extraValue, std::string_view value) {
  out_ += prefix_;
  out_ += name;
  std::string body;
  for (const auto& [label, label_value] : labels) {
    body += ',';
    body += label;
    body += "=\"";
    body += escapeLabelValue(label_value);
    body += '"';
  }
  if (!extraName.empty()) {
    body += ',';
    body += extraName;
    body += "=\"";
    body += extraValue;  // formatted by the writer itself: nothing to escape
    body += '"';
  }
  body += const_labels_;
  if (!body.empty()) {
    out_ += '{';
    out_.append(body, 1, std::string::npos);  // without the leading comma
    out_ += '}';
  }
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

HOLDBACK_INLINE void PrometheusWriter::sample(std::string_view name, std::span<const Label> labels,
                                              double value) {
  write(name, labels, {}, {}, formatSampleValue(value));
}

HOLDBACK_INLINE void PrometheusWriter::sample(std::string_view name, std::span<const Label> labels,
                                              std::uint64_t value) {
  write(name, labels, {}, {}, std::to_string(value));
}

HOLDBACK_INLINE void PrometheusWriter::histogram(std::string_view name,
                                                 std::span<const Label> labels,
                                                 std::span<const double> upperBounds,
                                                 std::span<const std::uint64_t> counts,
                                                 double sum) {
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= upperBounds.size(); ++i) {
    if (i < counts.size()) cumulative += counts[i];
    const std::string le = i < upperBounds.size() ? formatSampleValue(upperBounds[i]) : "+Inf";
    write(bucket, labels, "le", le, std::to_string(cumulative));
  }
  write(std::string(name) + "_sum", labels, {}, {}, formatSampleValue(sum));
  write(std::string(name) + "_count", labels, {}, {}, std::to_string(cumulative));
}

namespace detail {

HOLDBACK_INLINE double ratio(std::uint64_t used, std::uint64_t max) {
  return max == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(max);
}

}  // namespace detail

HOLDBACK_INLINE std::string_view prometheusOutcomeLabel(QueueOutcome outcome) noexcept {
  // Upstream's string form (#1636); toString() keeps holdback's name for the cancelled outcome.
  if (outcome == QueueOutcome::kEvictedCancelled) return "EvictedContextCancelled";
  return toString(outcome);
}

HOLDBACK_INLINE std::vector<std::pair<Priority, std::array<std::uint64_t, kNumQueueOutcomes>>>
requestedPriorityOutcomes(const FlowControllerStats& stats) {
  std::map<Priority, std::array<std::uint64_t, kNumQueueOutcomes>, std::greater<>> by_label;
  for (const BandStats& b : stats.bands) {
    std::array<std::uint64_t, kNumQueueOutcomes> own = b.outcomes;
    for (const RequestedPriorityOutcomes& r : b.requestedOutcomes) {
      auto& requested = by_label[r.requestedPriority];
      for (std::size_t k = 0; k < kNumQueueOutcomes; ++k) {
        // A part of the band's counts (in a snapshot never more than them).
        own[k] -= std::min(own[k], r.outcomes[k]);
        requested[k] += r.outcomes[k];
      }
    }
    auto& label = by_label[b.priority];
    for (std::size_t k = 0; k < kNumQueueOutcomes; ++k) label[k] += own[k];
  }
  return {by_label.begin(), by_label.end()};
}

namespace detail {

// flow_control_queue_size / _queue_bytes with fairness_id (FlowControllerStats::
// fairnessIdLabelLimit > 0): the named flows of every provisioned band, then its "other" bucket
// (always present, so every band has a series; a named flow never has the bucket's label).
HOLDBACK_INLINE void renderFlowQueues(PrometheusWriter& w, const FlowControllerStats& stats) {
  using Label = PrometheusWriter::Label;
  for (const bool bytes : {false, true}) {
    const std::string_view name = bytes ? "flow_control_queue_bytes" : "flow_control_queue_size";
    w.family(name, "gauge",
             bytes ? "Bytes queued, per priority band and flow (fairness_id, capped; the rest "
                     "in fairness_id=\"other\")."
                   : "Requests queued, per priority band and flow (fairness_id, capped; the rest "
                     "in fairness_id=\"other\").");
    for (const BandStats& b : stats.bands) {
      if (!b.provisioned) continue;
      const std::string priority = std::to_string(b.priority);
      for (const FlowQueueStats& f : b.flowQueues) {
        w.sample(name, {Label{"priority", priority}, Label{"fairness_id", f.flowId}},
                 bytes ? f.queuedBytes : std::uint64_t{f.queuedRequests});
      }
      w.sample(name, {Label{"priority", priority}, Label{"fairness_id", kOtherFairnessIdLabel}},
               bytes ? b.otherFlowsQueuedBytes : std::uint64_t{b.otherFlowsQueuedRequests});
    }
  }
}

}  // namespace detail

// In-flight eviction (flow/eviction.hpp), upstream's names (§3.4, §3.12); only while eviction is
// enabled or has ever revoked.
namespace detail {
HOLDBACK_INLINE void renderEvictionMetrics(PrometheusWriter& w, const EvictionStats& e) {
  using Label = PrometheusWriter::Label;
  if (!e.enabled && e.issued == 0) return;
  w.family("flow_control_revocations_issued_total", "counter",
           "In-flight revocations issued, by the victim's priority.");
  for (const auto& [priority, n] : e.issuedByPriority) {
    const std::string p = std::to_string(priority);
    w.sample("flow_control_revocations_issued_total", {Label{"priority", p}}, std::uint64_t{n});
  }
  // Holdback's split of the same revocations by trigger: upstream's head-of-line block, or
  // reserve restoration (EvictionOptions::restoreReserve); the two sum to the family above.
  w.family("flow_control_revocations_by_reason_total", "counter",
           "In-flight revocations issued, by trigger: blocked (head-of-line block) or reserve "
           "(reserve restoration).");
  w.sample("flow_control_revocations_by_reason_total", {Label{"reason", "blocked"}},
           std::uint64_t{e.issued >= e.restored ? e.issued - e.restored : 0});
  w.sample("flow_control_revocations_by_reason_total", {Label{"reason", "reserve"}},
           std::uint64_t{e.restored});
  w.family("flow_control_restoration_budget_withheld_total", "counter",
           "Reserve restoration decisions that revoked less than they sized because an eviction "
           "or waste budget was spent.");
  w.sample("flow_control_restoration_budget_withheld_total", {}, std::uint64_t{e.budgetWithheld});
  w.family("flow_control_revocations_total", "counter",
           "Revocations ended: confirmed by the host, or timed out.");
  w.sample("flow_control_revocations_total", {Label{"outcome", "confirmed"}},
           std::uint64_t{e.confirmed});
  w.sample("flow_control_revocations_total", {Label{"outcome", "timed_out"}},
           std::uint64_t{e.timedOut});
  w.family("flow_control_reclaim_target", "gauge",
           "Saturation to reclaim at the last eviction decision (saturation - ceiling).");
  w.sample("flow_control_reclaim_target", {}, e.reclaimTarget);
  w.family("flow_control_pending_reclaim", "gauge",
           "Saturation debited by revocations outstanding or within their grace.");
  w.sample("flow_control_pending_reclaim", {}, e.pendingReclaim);
  w.family("flow_control_revocation_confirmation_seconds", "histogram",
           "Time from issuing a revocation to the host's confirmation.");
  w.histogram("flow_control_revocation_confirmation_seconds", {},
              kRevocationConfirmationBucketsSeconds, e.confirmationBuckets,
              e.confirmationSumSeconds);
}
}  // namespace detail

HOLDBACK_INLINE std::string renderPrometheus(const FlowControllerStats& stats,
                                             std::string_view pool) {
  using Label = PrometheusWriter::Label;
  PrometheusWriter w("holdback_", {{"inference_pool", std::string(pool)}});
  // One gauge or counter family with a sample per band: value(b) for every band `include(b)`.
  const auto perBand = [&w, &stats](std::string_view name, std::string_view type,
                                    std::string_view help, auto include, auto value) {
    w.family(name, type, help);
    for (const BandStats& b : stats.bands) {
      if (!include(b)) continue;
      const std::string priority = std::to_string(b.priority);
      w.sample(name, {Label{"priority", priority}}, value(b));
    }
  };
  const auto provisioned = [](const BandStats& b) { return b.provisioned; };
  const auto every = [](const BandStats&) { return true; };

  if (stats.fairnessIdLabelLimit == 0) {
    perBand("flow_control_queue_size", "gauge", "Requests queued, per priority band.", provisioned,
            [](const BandStats& b) { return std::uint64_t{b.queuedRequests}; });
    perBand("flow_control_queue_bytes", "gauge", "Bytes queued, per priority band.", provisioned,
            [](const BandStats& b) { return std::uint64_t{b.queuedBytes}; });
  } else {
    detail::renderFlowQueues(w, stats);
  }

  w.family("flow_control_pool_saturation", "gauge",
           "Pool saturation seen by the last dispatch cycle, per stage.");
  w.sample("flow_control_pool_saturation", {Label{"stage", "effective"}}, stats.lastSaturation);
  if (stats.lastPrefillSaturation) {
    w.sample("flow_control_pool_saturation", {Label{"stage", "prefill"}},
             *stats.lastPrefillSaturation);
  }
  if (stats.lastDecodeSaturation) {
    w.sample("flow_control_pool_saturation", {Label{"stage", "decode"}},
             *stats.lastDecodeSaturation);
  }

  perBand("flow_control_capacity_utilization_requests", "gauge",
          "Queued requests over the band's maxRequests.", provisioned,
          [](const BandStats& b) { return detail::ratio(b.queuedRequests, b.maxRequests); });
  perBand("flow_control_capacity_utilization_bytes", "gauge",
          "Queued bytes over the band's maxBytes.", provisioned,
          [](const BandStats& b) { return detail::ratio(b.queuedBytes, b.maxBytes); });
  if (stats.maxRequests > 0) {
    w.family("flow_control_global_capacity_utilization_requests", "gauge",
             "Queued requests over the global maxRequests.");
    w.sample("flow_control_global_capacity_utilization_requests", {},
             detail::ratio(stats.queuedRequests, stats.maxRequests));
  }
  if (stats.maxBytes > 0) {
    w.family("flow_control_global_capacity_utilization_bytes", "gauge",
             "Queued bytes over the global maxBytes.");
    w.sample("flow_control_global_capacity_utilization_bytes", {},
             detail::ratio(stats.queuedBytes, stats.maxBytes));
  }

  w.family("flow_control_requests_total", "counter",
           "Finalized requests, by outcome and requested priority.");
  for (const auto& [p, outcomes] : requestedPriorityOutcomes(stats)) {
    const std::string priority = std::to_string(p);
    for (const QueueOutcome o : kAllQueueOutcomes) {
      w.sample("flow_control_requests_total",
               {Label{"outcome", prometheusOutcomeLabel(o)}, Label{"priority", priority}},
               std::uint64_t{outcomes[static_cast<std::size_t>(o)]});
    }
  }

  w.family("flow_control_request_queue_duration_seconds", "histogram",
           "Time dispatched requests spent queued, per priority band.");
  for (const BandStats& b : stats.bands) {
    const std::string priority = std::to_string(b.priority);
    const Label labels[] = {{"outcome", "Dispatched"}, {"priority", priority}};
    w.histogram("flow_control_request_queue_duration_seconds", labels, kQueueDurationBucketsSeconds,
                b.queueDurationBuckets, b.queueDurationSumSeconds);
  }

  // Call durations (FlowControllerOptions::durationMetrics), unlabelled but for inference_pool.
  if (stats.dispatchCycleDuration) {
    w.family("flow_control_dispatch_cycle_duration_seconds", "histogram",
             "Duration of dispatch cycles (pool sample, policy, fairness, ordering).");
    w.histogram("flow_control_dispatch_cycle_duration_seconds", {}, kCallDurationBucketsSeconds,
                stats.dispatchCycleDuration->buckets, stats.dispatchCycleDuration->sumSeconds);
  }
  if (stats.enqueueDuration) {
    w.family("flow_control_request_enqueue_duration_seconds", "histogram",
             "Duration of enqueue calls.");
    w.histogram("flow_control_request_enqueue_duration_seconds", {}, kCallDurationBucketsSeconds,
                stats.enqueueDuration->buckets, stats.enqueueDuration->sumSeconds);
  }

  // holdback extensions (no Go counterpart).
  perBand(
      "flow_control_band_ceiling", "gauge",
      "Ceiling of the band in the last dispatch cycle (absent when outside the domain).",
      [](const BandStats& b) { return b.provisioned && b.lastCeiling.has_value(); },
      [](const BandStats& b) { return *b.lastCeiling; });
  perBand("flow_control_gated_cycles_total", "counter",
          "Dispatch cycles that stopped at this gated band (head-of-line).", every,
          [](const BandStats& b) { return std::uint64_t{b.gatedCycles}; });
  w.family("flow_control_dispatch_cycles_total", "counter", "Dispatch cycles run.");
  w.sample("flow_control_dispatch_cycles_total", {}, std::uint64_t{stats.cycles});
  w.family("flow_control_stale_gated_cycles_total", "counter",
           "Dispatch cycles gated while every endpoint's telemetry was stale for the detector.");
  w.sample("flow_control_stale_gated_cycles_total", {}, std::uint64_t{stats.staleGatedCycles});
  w.family("flow_control_yielded_cycles_total", "counter",
           "Dispatch cycles that left a band's dispatch to a gateway replica whose head of the "
           "band had waited longer.");
  w.sample("flow_control_yielded_cycles_total", {}, std::uint64_t{stats.yieldedCycles});
  detail::renderEvictionMetrics(w, stats.eviction);
  return w.take();
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
