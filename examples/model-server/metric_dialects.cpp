#include "metric_dialects.hpp"

#include <algorithm>

#include "holdback/metrics/prometheus.hpp"

namespace holdback_examples {
namespace {

using Label = holdback::PrometheusWriter::Label;
constexpr std::int64_t kTrtllmTokensPerBlock = 64;

void vllmV0(holdback::PrometheusWriter& w, const DialectGauges& g) {
  const Label model{"model_name", g.model};
  w.family("vllm:num_requests_running", "gauge", "Number of requests currently running on GPU.");
  w.sample("vllm:num_requests_running", {model}, g.running);
  w.family("vllm:num_requests_swapped", "gauge", "Number of requests swapped to CPU.");
  w.sample("vllm:num_requests_swapped", {model}, 0.0);
  w.family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  w.sample("vllm:num_requests_waiting", {model}, g.waiting);
  w.family("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.");
  w.sample("vllm:gpu_cache_usage_perc", {model}, g.kvCacheUsage);
}

void sglang(holdback::PrometheusWriter& w, const DialectGauges& g) {
  const Label model{"model_name", g.model};
  const Label rank{"tp_rank", "0"};
  w.family("sglang:num_running_reqs", "gauge", "The number of running requests.");
  w.sample("sglang:num_running_reqs", {model, rank}, g.running);
  w.family("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.");
  w.sample("sglang:num_queue_reqs", {model, rank}, g.waiting);
  w.family("sglang:token_usage", "gauge", "The token usage.");
  w.sample("sglang:token_usage", {model, rank}, g.kvCacheUsage);
  w.family("sglang:max_total_num_tokens", "gauge",
           "Maximum total number of tokens in the KV cache pool.");
  w.sample("sglang:max_total_num_tokens", {model, rank}, double(g.kvCapacityTokens));
}

void llamacpp(holdback::PrometheusWriter& w, const DialectGauges& g) {
  w.family("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  w.sample("llamacpp:kv_cache_usage_ratio", {}, g.kvCacheUsage);
  w.family("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.");
  w.sample("llamacpp:kv_cache_tokens", {}, g.kvCacheUsage * double(g.kvCapacityTokens));
  w.family("llamacpp:requests_processing", "gauge", "Number of requests processing.");
  w.sample("llamacpp:requests_processing", {}, g.running);
  w.family("llamacpp:requests_deferred", "gauge", "Number of requests deferred.");
  w.sample("llamacpp:requests_deferred", {}, g.waiting);
}

void tgi(holdback::PrometheusWriter& w, const DialectGauges& g) {
  w.family("tgi_queue_size", "gauge", "Current queue size");
  w.sample("tgi_queue_size", {}, g.waiting);
  w.family("tgi_batch_current_size", "gauge", "Current batch size");
  w.sample("tgi_batch_current_size", {}, g.running);
}

void trtllm(holdback::PrometheusWriter& w, const DialectGauges& g) {
  const Label model{"model", g.model};
  const Label version{"version", "1"};
  w.family("nv_trt_llm_request_metrics", "gauge", "TRT LLM request metrics");
  const std::pair<const char*, double> requests[] = {{"waiting", g.waiting},
                                                     {"context", 0.0},
                                                     {"scheduled", g.running},
                                                     {"max", double(g.slots)},
                                                     {"active", g.waiting + g.running}};
  for (const auto& [type, value] : requests) {
    w.sample("nv_trt_llm_request_metrics", {model, Label{"request_type", type}, version}, value);
  }
  // The block counts round the token capacity up to whole blocks.
  const double max_blocks =
      double((g.kvCapacityTokens + kTrtllmTokensPerBlock - 1) / kTrtllmTokensPerBlock);
  const double used = std::clamp(g.kvCacheUsage, 0.0, 1.0) * max_blocks;
  w.family("nv_trt_llm_kv_cache_block_metrics", "gauge", "TRT LLM KV cache block metrics");
  const std::pair<const char*, double> blocks[] = {{"tokens_per", double(kTrtllmTokensPerBlock)},
                                                   {"used", used},
                                                   {"free", max_blocks - used},
                                                   {"max", max_blocks},
                                                   {"fraction", g.kvCacheUsage}};
  for (const auto& [type, value] : blocks) {
    w.sample("nv_trt_llm_kv_cache_block_metrics",
             {Label{"kv_cache_block_type", type}, model, version}, value);
  }
  w.family("nv_inference_pending_request_count", "gauge",
           "Instantaneous number of pending requests awaiting execution per-model.");
  w.sample("nv_inference_pending_request_count", {model, version}, g.waiting);
}

}  // namespace

bool isServerDialect(std::string_view name) {
  return std::find(std::begin(kServerDialects), std::end(kServerDialects), name) !=
         std::end(kServerDialects);
}

std::string renderDialectMetrics(std::string_view dialect, const DialectGauges& g) {
  holdback::PrometheusWriter w;
  if (dialect == "vllm-v0") {
    vllmV0(w, g);
  } else if (dialect == "sglang") {
    sglang(w, g);
  } else if (dialect == "llamacpp") {
    llamacpp(w, g);
  } else if (dialect == "tgi") {
    tgi(w, g);
  } else if (dialect == "trtllm") {
    trtllm(w, g);
  }
  return w.take();
}

}  // namespace holdback_examples
