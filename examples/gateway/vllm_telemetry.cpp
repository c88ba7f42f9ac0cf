#include "vllm_telemetry.hpp"

#include <charconv>
#include <cmath>
#include <string_view>
#include <system_error>

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

namespace holdback::gateway {
namespace {

// An integral label value in [1, max], else a sentence saying what is wrong.
std::optional<std::int64_t> integralLabel(const PrometheusSample& s, std::string_view key,
                                          std::int64_t max, std::string& problem) {
  const auto text = s.label(key);
  if (!text) {
    problem = "vllm:cache_config_info has no " + std::string(key) + " label";
    return std::nullopt;
  }
  double v = std::nan("");
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, v);
  const bool number = ec == std::errc() && ptr == end && std::isfinite(v);
  if (!number || v != std::floor(v) || v < 1.0 || v > static_cast<double>(max)) {
    problem = "vllm:cache_config_info " + std::string(key) + "=\"" + std::string(*text) +
              "\" is not an integer in [1, " + std::to_string(max) + "]";
    return std::nullopt;
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace

CacheConfigInfo extractCacheConfigInfo(const ParsedPrometheusText& metrics) {
  CacheConfigInfo out;
  for (const PrometheusSample& s : metrics.samples) {
    if (s.name != "vllm:cache_config_info") continue;
    std::string problem;
    const auto blocks = integralLabel(s, "num_gpu_blocks", CacheConfigInfo::kMaxGpuBlocks, problem);
    const auto size = blocks
                          ? integralLabel(s, "block_size", CacheConfigInfo::kMaxBlockSize, problem)
                          : std::nullopt;
    if (blocks && size && *blocks > CacheConfigInfo::kMaxKvCapacityTokens / *size) {
      problem = "vllm:cache_config_info num_gpu_blocks x block_size = " + std::to_string(*blocks) +
                " x " + std::to_string(*size) + " is over " +
                std::to_string(CacheConfigInfo::kMaxKvCapacityTokens) + " tokens";
    } else if (blocks && size) {
      const std::int64_t tokens = *blocks * *size;
      if (out.status != CacheConfigInfo::Status::kValid || tokens < out.kvCapacityTokens) {
        out = {CacheConfigInfo::Status::kValid, *blocks, *size, tokens, {}};
      }
      continue;
    }
    if (out.status == CacheConfigInfo::Status::kAbsent) {
      out.status = CacheConfigInfo::Status::kInvalid;
      out.problem = std::move(problem);
    }
  }
  return out;
}

}  // namespace holdback::gateway
