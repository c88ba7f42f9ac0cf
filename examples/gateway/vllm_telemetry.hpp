// What the gateway reads from a vLLM-compatible server's /metrics: the waiting queue, the running
// sequences and the KV-cache usage, out of text parsed by the library's Prometheus parser
// (holdback/metrics/prometheus_parser.hpp).
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <cstdint>
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
  // Capacity the engine reports through its metric dialect's gauges, as read (unchecked):
  // SGLang's max_total_num_tokens, TensorRT-LLM's max request count. vLLM's comes from
  // vllm:cache_config_info instead (CacheConfigInfo below). nullopt: not exported.
  std::optional<double> reportedKvCapacityTokens;
  std::optional<double> reportedSlots;
};

// The telemetry in `metrics`, or nullopt with `missing` naming what was absent when the waiting
// queue or the KV-cache usage is missing (a host must not read an absent gauge as 0: an idle
// server and a broken exporter would look the same).
[[nodiscard]] std::optional<VllmTelemetry> extractVllmTelemetry(const ParsedPrometheusText& metrics,
                                                                std::string* missing = nullptr);

// ---- KV capacity: vllm:cache_config_info ----
// vLLM exports its cache configuration as an info gauge: value 1, the settings in its labels,
//   vllm:cache_config_info{block_size="16",num_gpu_blocks="2345",gpu_memory_utilization="0.9",...}
//   1
// The KV cache holds num_gpu_blocks x block_size tokens. The other labels are ignored.
//
// Rules (each outcome defined; nothing throws):
//   - no vllm:cache_config_info sample: kAbsent (older vLLM, another engine, a proxy);
//   - num_gpu_blocks and block_size must be integers (written as such or as an integral number,
//     "2345" or "2345.0") with num_gpu_blocks in [1, kMaxGpuBlocks], block_size in
//     [1, kMaxBlockSize] and the product at most kMaxKvCapacityTokens; anything else (a missing
//     label, vLLM's "None" before the cache is profiled, 0, a negative, 1e15 blocks, text) is
//     kInvalid with `problem` naming the label, its value and what is allowed;
//   - several samples (one per engine or model): the smallest valid capacity (a request must fit
//     on the engine it lands on); kInvalid only when none is valid.
struct CacheConfigInfo {
  enum class Status { kAbsent, kInvalid, kValid };
  static constexpr std::int64_t kMaxGpuBlocks = std::int64_t{1} << 32;
  static constexpr std::int64_t kMaxBlockSize = std::int64_t{1} << 20;
  // 2^40 tokens (about 1.1e12): far beyond any GPU's KV cache, and the ledger's per-request cap.
  static constexpr std::int64_t kMaxKvCapacityTokens = std::int64_t{1} << 40;

  Status status = Status::kAbsent;
  std::int64_t numGpuBlocks = 0;      // kValid only
  std::int64_t blockSize = 0;         // kValid only
  std::int64_t kvCapacityTokens = 0;  // numGpuBlocks x blockSize; kValid only
  std::string problem;                // kInvalid: what is wrong
};

[[nodiscard]] CacheConfigInfo extractCacheConfigInfo(const ParsedPrometheusText& metrics);

}  // namespace holdback::gateway
