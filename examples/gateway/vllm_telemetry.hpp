// What the gateway reads from a vLLM-compatible server's /metrics: the waiting queue, the running
// sequences and the KV-cache usage, out of text parsed by the library's Prometheus parser
// (holdback/metrics/prometheus_parser.hpp).
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <optional>
#include <string>

#include "holdback/metrics/prometheus_parser.hpp"

namespace holdback::gateway {

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
[[nodiscard]] std::optional<VllmTelemetry> extractVllmTelemetry(const ParsedPrometheusText& metrics,
                                                                std::string* missing = nullptr);

}  // namespace holdback::gateway
