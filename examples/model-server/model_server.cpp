#include "model_server.hpp"

#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>

#include "holdback/metrics/prometheus.hpp"
#include "metric_dialects.hpp"

namespace holdback_examples {

ModelServer::ModelServer(const ServerOptions& o)
    : options_(o),
      scheduler_({.slots = o.slots,
                  .kvCapacityTokens = o.kvCapacityTokens,
                  .pool = o.poolModel ? std::optional(holdback::sim::PoolTiming{
                                            .prefillBaseMs = o.prefillBaseMs,
                                            .prefillPerTokenMs = o.prefillPerTokenMs,
                                            .tpotBaseMs = o.tpotBaseMs,
                                            .tpotPerRunningMs = o.tpotPerRunningMs})
                                      : std::nullopt}),
      context_{o.model, static_cast<std::int64_t>(std::time(nullptr))} {}

std::string ModelServer::metrics() const {
  const BatchScheduler::Snapshot s = scheduler_.snapshot();
  if (options_.dialect != "vllm") {  // metric_dialects.hpp
    return renderDialectMetrics(
        options_.dialect, {.model = options_.model,
                           .waiting = options_.fakeWaiting.value_or(static_cast<double>(s.waiting)),
                           .running = static_cast<double>(s.running),
                           .kvCacheUsage = options_.fakeKv.value_or(s.kvCacheUsage),
                           .kvCapacityTokens = options_.kvCapacityTokens,
                           .slots = options_.slots});
  }
  using Label = holdback::PrometheusWriter::Label;
  holdback::PrometheusWriter w;
  const auto gauge = [&](std::string_view name, std::string_view help, double value) {
    w.family(name, "gauge", help);
    w.sample(name, {Label{"model_name", options_.model}}, value);
  };
  const auto counter = [&](std::string_view name, std::string_view help, std::uint64_t value,
                           std::initializer_list<Label> labels) {
    w.family(name, "counter", help);
    w.sample(name, labels, value);
  };
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
        static_cast<double>(s.running));
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
        options_.fakeWaiting.value_or(static_cast<double>(s.waiting)));
  const double kv = options_.fakeKv.value_or(s.kvCacheUsage);
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv);
  gauge("vllm:gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage (older name of kv_cache_usage_perc).", kv);
  // vLLM's cache configuration as an info gauge (value 1, the settings in the labels): the KV
  // cache holds num_gpu_blocks x block_size tokens (blocks of 16 when the capacity divides).
  const std::int64_t block = options_.kvCapacityTokens % 16 == 0 ? 16 : 1;
  w.family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
  w.sample("vllm:cache_config_info",
           {Label{"block_size", std::to_string(block)}, Label{"cache_dtype", "auto"},
            Label{"enable_prefix_caching", "False"},
            Label{"num_gpu_blocks", std::to_string(options_.kvCapacityTokens / block)}},
           1.0);
  counter("vllm:request_success_total", "Count of successfully processed requests.",
          counters_.success.load(),
          {Label{"finished_reason", "length"}, Label{"model_name", options_.model}});
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
          counters_.promptTokens.load(), {Label{"model_name", options_.model}});
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
          counters_.generationTokens.load(), {Label{"model_name", options_.model}});
  return w.take();
}

}  // namespace holdback_examples
