#include "vllm_telemetry.hpp"

#include <cmath>

namespace holdback::gateway {

std::optional<VllmTelemetry> extractVllmTelemetry(const ParsedPrometheusText& metrics,
                                                  std::string* missing) {
  VllmTelemetry t;
  bool have_waiting = false;
  bool have_kv = false;
  bool have_gpu = false;
  double gpu = 0.0;
  for (const PrometheusSample& s : metrics.samples) {
    if (s.name == "vllm:num_requests_waiting") {
      t.waiting += s.value;
      have_waiting = true;
    } else if (s.name == "vllm:num_requests_running") {
      t.running += s.value;
    } else if (s.name == "vllm:kv_cache_usage_perc") {
      // std::max would drop a NaN that comes second; keep it so the detector sees invalid data.
      t.kvCacheUsage =
          have_kv && !(s.value > t.kvCacheUsage) && !std::isnan(s.value) ? t.kvCacheUsage : s.value;
      have_kv = true;
    } else if (s.name == "vllm:gpu_cache_usage_perc") {
      gpu = have_gpu && !(s.value > gpu) && !std::isnan(s.value) ? gpu : s.value;
      have_gpu = true;
    }
  }
  if (!have_kv && have_gpu) {
    t.kvCacheUsage = gpu;
    have_kv = true;
  }
  if (!have_waiting || !have_kv) {
    if (missing) {
      *missing = !have_waiting ? "vllm:num_requests_waiting"
                               : "vllm:kv_cache_usage_perc (or vllm:gpu_cache_usage_perc)";
    }
    return std::nullopt;
  }
  return t;
}

}  // namespace holdback::gateway
