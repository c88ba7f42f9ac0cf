// The Prometheus text parser moved into the library (holdback/metrics/prometheus_parser.hpp; the
// writer is holdback/metrics/prometheus.hpp). This header keeps the names the gateway uses and
// adds what is vLLM-specific: which gauges the gateway reads.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "holdback/metrics/prometheus.hpp"
#include "holdback/metrics/prometheus_parser.hpp"

namespace holdback::gateway {

using Sample = holdback::PrometheusSample;
using ParsedMetrics = holdback::ParsedPrometheusText;
using holdback::parsePrometheusText;

// Parses one sample line (no line end). nullopt when it is not a valid sample.
[[nodiscard]] inline std::optional<Sample> parseSampleLine(std::string_view line) {
  return holdback::parsePrometheusSampleLine(line);
}

// Parses a sample value; nullopt when `token` is not one.
[[nodiscard]] inline std::optional<double> parseSampleValue(std::string_view token) noexcept {
  return holdback::parsePrometheusValue(token);
}

// What the gateway reads from a vLLM-compatible server.
struct VllmTelemetry {
  double waiting = 0.0;       // vllm:num_requests_waiting, summed over samples (one per model)
  double running = 0.0;       // vllm:num_requests_running, summed; 0 when absent
  double kvCacheUsage = 0.0;  // vllm:kv_cache_usage_perc (max over samples), else
                              // vllm:gpu_cache_usage_perc (older vLLM)
};

// The telemetry in `metrics`, or nullopt with `missing` naming what was absent when the waiting
// queue or the KV-cache usage is missing (a host must not read an absent gauge as 0: an idle
// server and a broken exporter would look the same).
[[nodiscard]] std::optional<VllmTelemetry> extractVllmTelemetry(const ParsedMetrics& metrics,
                                                                std::string* missing = nullptr);

}  // namespace holdback::gateway
