// Implementation of holdback/flow/flow_controller.hpp: compiled into libholdback by
// src/flow_prometheus.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

// Prometheus text exposition of FlowControllerStats.
#include <charconv>
#include <cmath>
#include <string>

#include "holdback/flow/flow_controller.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail::flow_prometheus {

HOLDBACK_INLINE std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

HOLDBACK_INLINE std::string escapeLabel(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
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

class Writer {
 public:
  explicit Writer(std::string_view pool) : pool_(escapeLabel(pool)) {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP holdback_";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE holdback_";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // `labels` is either empty or "k=\"v\",..." (already escaped); inference_pool is appended.
  void sample(std::string_view name, std::string_view labels, const std::string& value) {
    out_ += "holdback_";
    out_ += name;
    out_ += '{';
    if (!labels.empty()) {
      out_ += labels;
      out_ += ',';
    }
    out_ += "inference_pool=\"";
    out_ += pool_;
    out_ += "\"} ";
    out_ += value;
    out_ += '\n';
  }

  std::string take() { return std::move(out_); }

 private:
  std::string pool_;
  std::string out_;
};

HOLDBACK_INLINE std::string priorityLabel(Priority p) {
  return "priority=\"" + std::to_string(p) + "\"";
}

HOLDBACK_INLINE double ratio(std::uint64_t used, std::uint64_t max) {
  return max == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(max);
}

}  // namespace detail::flow_prometheus

HOLDBACK_INLINE std::string renderPrometheus(const FlowControllerStats& stats,
                                             std::string_view pool) {
  detail::flow_prometheus::Writer w(pool);

  w.header("flow_control_queue_size", "gauge", "Requests queued, per priority band.");
  for (const BandStats& b : stats.bands) {
    if (b.provisioned) {
      w.sample("flow_control_queue_size", detail::flow_prometheus::priorityLabel(b.priority),
               std::to_string(b.queuedRequests));
    }
  }
  w.header("flow_control_queue_bytes", "gauge", "Bytes queued, per priority band.");
  for (const BandStats& b : stats.bands) {
    if (b.provisioned) {
      w.sample("flow_control_queue_bytes", detail::flow_prometheus::priorityLabel(b.priority),
               std::to_string(b.queuedBytes));
    }
  }

  w.header("flow_control_pool_saturation", "gauge",
           "Pool saturation seen by the last dispatch cycle, per stage.");
  w.sample("flow_control_pool_saturation", "stage=\"effective\"",
           detail::flow_prometheus::number(stats.lastSaturation));
  if (stats.lastPrefillSaturation) {
    w.sample("flow_control_pool_saturation", "stage=\"prefill\"",
             detail::flow_prometheus::number(*stats.lastPrefillSaturation));
  }
  if (stats.lastDecodeSaturation) {
    w.sample("flow_control_pool_saturation", "stage=\"decode\"",
             detail::flow_prometheus::number(*stats.lastDecodeSaturation));
  }

  w.header("flow_control_capacity_utilization_requests", "gauge",
           "Queued requests over the band's maxRequests.");
  for (const BandStats& b : stats.bands) {
    if (b.provisioned) {
      w.sample("flow_control_capacity_utilization_requests",
               detail::flow_prometheus::priorityLabel(b.priority),
               detail::flow_prometheus::number(
                   detail::flow_prometheus::ratio(b.queuedRequests, b.maxRequests)));
    }
  }
  w.header("flow_control_capacity_utilization_bytes", "gauge",
           "Queued bytes over the band's maxBytes.");
  for (const BandStats& b : stats.bands) {
    if (b.provisioned) {
      w.sample("flow_control_capacity_utilization_bytes",
               detail::flow_prometheus::priorityLabel(b.priority),
               detail::flow_prometheus::number(
                   detail::flow_prometheus::ratio(b.queuedBytes, b.maxBytes)));
    }
  }
  if (stats.maxRequests > 0) {
    w.header("flow_control_global_capacity_utilization_requests", "gauge",
             "Queued requests over the global maxRequests.");
    w.sample("flow_control_global_capacity_utilization_requests", "",
             detail::flow_prometheus::number(
                 detail::flow_prometheus::ratio(stats.queuedRequests, stats.maxRequests)));
  }
  if (stats.maxBytes > 0) {
    w.header("flow_control_global_capacity_utilization_bytes", "gauge",
             "Queued bytes over the global maxBytes.");
    w.sample("flow_control_global_capacity_utilization_bytes", "",
             detail::flow_prometheus::number(
                 detail::flow_prometheus::ratio(stats.queuedBytes, stats.maxBytes)));
  }

  w.header("flow_control_requests_total", "counter",
           "Finalized requests, by outcome and priority band.");
  for (const BandStats& b : stats.bands) {
    for (const QueueOutcome o : kAllQueueOutcomes) {
      const std::string labels = "outcome=\"" + std::string(toString(o)) + "\"," +
                                 detail::flow_prometheus::priorityLabel(b.priority);
      w.sample("flow_control_requests_total", labels,
               std::to_string(b.outcomes[static_cast<std::size_t>(o)]));
    }
  }

  w.header("flow_control_request_queue_duration_seconds", "histogram",
           "Time dispatched requests spent queued, per priority band.");
  for (const BandStats& b : stats.bands) {
    const std::string prio = detail::flow_prometheus::priorityLabel(b.priority);
    const std::string outcome = "outcome=\"Dispatched\",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= kQueueDurationBucketsSeconds.size(); ++i) {
      cumulative += b.queueDurationBuckets[i];
      const std::string le = i < kQueueDurationBucketsSeconds.size()
                                 ? detail::flow_prometheus::number(kQueueDurationBucketsSeconds[i])
                                 : std::string("+Inf");
      std::string labels = outcome;
      labels += prio;
      labels += ",le=\"";
      labels += le;
      labels += '"';
      w.sample("flow_control_request_queue_duration_seconds_bucket", labels,
               std::to_string(cumulative));
    }
    w.sample("flow_control_request_queue_duration_seconds_sum", outcome + prio,
             detail::flow_prometheus::number(b.queueDurationSumSeconds));
    w.sample("flow_control_request_queue_duration_seconds_count", outcome + prio,
             std::to_string(cumulative));
  }

  // holdback extensions (no Go counterpart).
  w.header("flow_control_band_ceiling", "gauge",
           "Ceiling of the band in the last dispatch cycle (absent when outside the domain).");
  for (const BandStats& b : stats.bands) {
    if (b.provisioned && b.lastCeiling) {
      w.sample("flow_control_band_ceiling", detail::flow_prometheus::priorityLabel(b.priority),
               detail::flow_prometheus::number(*b.lastCeiling));
    }
  }
  w.header("flow_control_gated_cycles_total", "counter",
           "Dispatch cycles that stopped at this gated band (head-of-line).");
  for (const BandStats& b : stats.bands) {
    w.sample("flow_control_gated_cycles_total", detail::flow_prometheus::priorityLabel(b.priority),
             std::to_string(b.gatedCycles));
  }
  w.header("flow_control_dispatch_cycles_total", "counter", "Dispatch cycles run.");
  w.sample("flow_control_dispatch_cycles_total", "", std::to_string(stats.cycles));
  return w.take();
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
