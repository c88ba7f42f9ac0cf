// The metric dialects (holdback/metrics/metric_dialect.hpp) against /metrics text in each
// engine's documented form: HELP/TYPE lines, the engine's labels, several models (or engines)
// on one server where the engine can serve them, and the neighbouring series a real scrape has.
#include "holdback/metrics/metric_dialect.hpp"
#include "holdback/metrics/metric_dialect_config.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_values.hpp"

namespace holdback {
namespace {

using DialectQ = DialectQuantity;

// vLLM v1: per-engine, per-model labelled gauges; the "_perc" gauge is a fraction.
constexpr const char* kVllmV1Text =
    R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1234.0
)";

// vLLM v0: model_name only, GPU cache usage as a fraction.
constexpr const char* kVllmV0Text =
    R"(# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="unsloth/Llama-3.2-1B-Instruct"} 2.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="unsloth/Llama-3.2-1B-Instruct"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="unsloth/Llama-3.2-1B-Instruct"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="unsloth/Llama-3.2-1B-Instruct"} 0.75
# HELP vllm:cpu_cache_usage_perc CPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:cpu_cache_usage_perc gauge
vllm:cpu_cache_usage_perc{model_name="unsloth/Llama-3.2-1B-Instruct"} 0.0
)";

// SGLang (--enable-metrics): model_name plus rank labels; two models on one router.
constexpr const char* kSglangText =
    R"(# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0"} 0.28
sglang:token_usage{model_name="Qwen/Qwen2.5-7B-Instruct",tp_rank="0"} 0.61
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0"} 28.0
sglang:num_running_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",tp_rank="0"} 4.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0"} 2.0
sglang:num_queue_reqs{model_name="Qwen/Qwen2.5-7B-Instruct",tp_rank="0"} 3.0
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{model_name="meta-llama/Llama-3.1-8B-Instruct",tp_rank="0"} 500000.0
sglang:max_total_num_tokens{model_name="Qwen/Qwen2.5-7B-Instruct",tp_rank="0"} 300000.0
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.007507552643049313
)";

// llama.cpp server (--metrics): one model per server, no labels.
constexpr const char* kLlamacppText =
    R"(# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 33065
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.40625
# HELP llamacpp:kv_cache_tokens KV-cache tokens.
# TYPE llamacpp:kv_cache_tokens gauge
llamacpp:kv_cache_tokens 1664
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 6
)";

// TGI: one model per server, unprefixed names, no KV gauge.
constexpr const char* kTgiText = R"(# TYPE tgi_request_count counter
tgi_request_count 1520
# TYPE tgi_queue_size gauge
tgi_queue_size 9
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 32
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 20480
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 12
tgi_request_duration_sum 431.2
tgi_request_duration_count 1520
)";

// Triton with the TensorRT-LLM backend (metrics port): two LLM models in one repository, a
// backend without the "waiting"/"fraction" series (older releases) for one of them.
constexpr const char* kTrtllmText = R"(# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 5
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 6
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 11
nv_trt_llm_request_metrics{model="tensorrt_llm_draft",request_type="waiting",version="1"} 2
nv_trt_llm_request_metrics{model="tensorrt_llm_draft",request_type="scheduled",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm_draft",request_type="max",version="1"} 64
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 1000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 3000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 4000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm_draft",version="1"} 64
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm_draft",version="1"} 1000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm_draft",version="1"} 1000
# HELP nv_trt_llm_inflight_batcher_metrics TRT LLM inflight_batcher-specific metrics
# TYPE nv_trt_llm_inflight_batcher_metrics gauge
nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="generation_requests",model="tensorrt_llm",version="1"} 5
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 99
)";

struct EngineCase {
  const char* dialect;
  const char* text;
  double waiting;
  double running;
  double kv;  // NaN: the engine exports none
};

class MetricDialectEngineTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(MetricDialectEngineTest, DetectsAndReadsTheDocumentedText) {
  const EngineCase& c = GetParam();
  const ParsedPrometheusText parsed = parsePrometheusText(c.text);
  EXPECT_EQ(parsed.skippedLines, 0u);
  const MetricDialect* d = detectMetricDialect(parsed);
  ASSERT_NE(d, nullptr) << describeExposedMetrics(parsed);
  EXPECT_EQ(d->name, c.dialect);
  const DialectReading r = readMetricDialect(*d, parsed);
  EXPECT_TRUE(r.complete(*d));
  EXPECT_EQ(r.get(DialectQ::kWaiting), c.waiting);
  EXPECT_EQ(r.get(DialectQ::kRunning), c.running);
  if (std::isnan(c.kv)) {
    EXPECT_FALSE(r.get(DialectQ::kKvUsage).has_value());
  } else {
    ASSERT_TRUE(r.get(DialectQ::kKvUsage).has_value());
    EXPECT_DOUBLE_EQ(*r.get(DialectQ::kKvUsage), c.kv);
  }
  EXPECT_TRUE(checkMetricDialect(*d, parsed, "/x").empty());
}

INSTANTIATE_TEST_SUITE_P(Engines, MetricDialectEngineTest,
                         ::testing::Values(
                             // Engines and models summed for the queues; the fullest engine's KV.
                             EngineCase{"vllm", kVllmV1Text, 5.0, 5.0, 0.5},
                             EngineCase{"vllm-v0", kVllmV0Text, 7.0, 2.0, 0.75},
                             EngineCase{"sglang", kSglangText, 5.0, 32.0, 0.61},
                             EngineCase{"llamacpp", kLlamacppText, 6.0, 4.0, 0.40625},
                             EngineCase{"tgi", kTgiText, 9.0, 32.0, test_support::kNaN},
                             // No "fraction" series: sum(used) / sum(max) = 2000 / 5000.
                             EngineCase{"trtllm", kTrtllmText, 7.0, 7.0, 0.4}),
                         [](const ::testing::TestParamInfo<EngineCase>& info) {
                           std::string name = info.param.dialect;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(MetricDialectTest, CapacityAndSlotsWhereExported) {
  const ParsedPrometheusText sglang = parsePrometheusText(kSglangText);
  const DialectReading s = readMetricDialect(*findMetricDialect("sglang"), sglang);
  EXPECT_EQ(s.get(DialectQ::kKvCapacityTokens), 800000.0);
  EXPECT_FALSE(s.get(DialectQ::kSlots).has_value());
  const ParsedPrometheusText trt = parsePrometheusText(kTrtllmText);
  const DialectReading t = readMetricDialect(*findMetricDialect("trtllm"), trt);
  EXPECT_EQ(t.get(DialectQ::kKvCapacityTokens), 5000.0 * 64.0);  // blocks summed x tokens per block
  EXPECT_EQ(t.get(DialectQ::kSlots), 128.0);
}

TEST(MetricDialectTest, TrtllmPrefersTheFractionAndFallsBackToPendingCount) {
  const ParsedPrometheusText p = parsePrometheusText(
      "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"m\"} 0.9\n"
      "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\",model=\"m\"} 1\n"
      "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"m\"} 10\n"
      "nv_inference_pending_request_count{model=\"m\",version=\"1\"} 4\n");
  const MetricDialect& d = *findMetricDialect("trtllm");
  const DialectReading r = readMetricDialect(d, p);
  EXPECT_EQ(r.get(DialectQ::kKvUsage), 0.9);
  EXPECT_EQ(r.sourceIndex[std::size_t(DialectQ::kKvUsage)], 0);
  EXPECT_EQ(r.get(DialectQ::kWaiting), 4.0);
  EXPECT_EQ(r.sourceIndex[std::size_t(DialectQ::kWaiting)], 1);
  EXPECT_EQ(detectMetricDialect(p), &d);
}

TEST(MetricDialectTest, VllmWithBothKvNamesIsV1AndNewerSglangPrefixReads) {
  const ParsedPrometheusText both = parsePrometheusText(
      "vllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc 0.2\nvllm:gpu_cache_usage_perc "
      "0.3\n");
  ASSERT_NE(detectMetricDialect(both), nullptr);
  EXPECT_EQ(detectMetricDialect(both)->name, "vllm");
  EXPECT_EQ(readMetricDialect(*detectMetricDialect(both), both).get(DialectQ::kKvUsage), 0.2);
  const ParsedPrometheusText underscore =
      parsePrometheusText("sglang_num_queue_reqs{model_name=\"m\"} 3\nsglang_token_usage 0.5\n");
  ASSERT_NE(detectMetricDialect(underscore), nullptr);
  EXPECT_EQ(detectMetricDialect(underscore)->name, "sglang");
}

TEST(MetricDialectTest, KvUsageNaNWinsAndMissingRequiredKvDoesNotMatch) {
  const ParsedPrometheusText nan = parsePrometheusText(
      "vllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc 0.2\n"
      "vllm:kv_cache_usage_perc NaN\nvllm:kv_cache_usage_perc 0.9\n");
  const auto kv = readMetricDialect(*findMetricDialect("vllm"), nan).get(DialectQ::kKvUsage);
  ASSERT_TRUE(kv.has_value());
  EXPECT_TRUE(std::isnan(*kv));
  const ParsedPrometheusText no_kv = parsePrometheusText("vllm:num_requests_waiting 1\n");
  EXPECT_EQ(detectMetricDialect(no_kv), nullptr);
  const auto errors = checkMetricDialect(*findMetricDialect("vllm"), no_kv, "--dialect vllm");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "--dialect vllm/kvUsage: none of vllm:kv_cache_usage_perc is in the scrape");
}

TEST(MetricDialectTest, UnknownServerIsDescribedByItsNames) {
  const ParsedPrometheusText p =
      parsePrometheusText("b_metric 1\na_metric{x=\"1\"} 2\na_metric{x=\"2\"} 3\n");
  EXPECT_EQ(detectMetricDialect(p), nullptr);
  EXPECT_EQ(describeExposedMetrics(p), "a_metric, b_metric");
  EXPECT_EQ(describeExposedMetrics(p, 1), "a_metric and 1 more");
  EXPECT_EQ(describeExposedMetrics(parsePrometheusText("")), "no samples");
}

TEST(MetricDialectTest, SpecStringsParseAndRoundTrip) {
  std::string error;
  const auto a = parseMetricSource("nv_trt_llm_request_metrics{request_type=waiting}", &error);
  ASSERT_TRUE(a.has_value()) << error;
  ASSERT_EQ(a->series.labels.size(), 1u);
  EXPECT_EQ(a->series.labels[0].second, "waiting");
  EXPECT_EQ(a->toString(), "nv_trt_llm_request_metrics{request_type=\"waiting\"}");
  const auto b = parseMetricSource(" used{k=\"a\\\"b\", m = x ,} / total{k=\"t\"} % ");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->combine, MetricSource::Combine::kDivide);
  EXPECT_EQ(b->scale, 0.01);
  EXPECT_EQ(b->series.labels[0].second, "a\"b");
  EXPECT_EQ(b->series.labels[1].second, "x");
  const auto again = parseMetricSource(b->toString());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->toString(), b->toString());
  // Percent: 40 of 100 reads as 0.4.
  const ParsedPrometheusText p = parsePrometheusText("kv_percent 40\n");
  MetricDialect d{.name = "custom"};
  d.sources[std::size_t(DialectQ::kWaiting)].push_back(*parseMetricSource("kv_percent %"));
  EXPECT_DOUBLE_EQ(*readMetricDialect(d, p).get(DialectQ::kWaiting), 0.4);

  EXPECT_FALSE(parseMetricSource("", &error));
  EXPECT_EQ(error, "\"\" at 0: expected a metric name");
  EXPECT_FALSE(parseMetricSource("m{a}", &error));
  EXPECT_EQ(error, "\"m{a}\" at 3: expected '=' after label name");
  EXPECT_FALSE(parseMetricSource("m{a=\"x}", &error));
  EXPECT_FALSE(parseMetricSource("m trailing", &error));
  EXPECT_EQ(error, "\"m trailing\" at 2: unexpected text after the metric");
  EXPECT_FALSE(parseMetricSource("m /", &error));
}

TEST(MetricDialectTest, BuiltinTableIsComplete) {
  // Every built-in spec parsed (a typo would leave a quantity with fewer sources).
  const std::size_t kWaitingSources[] = {1, 1, 2, 1, 1, 2};
  const auto all = builtinMetricDialects();
  ASSERT_EQ(all.size(), 6u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].of(DialectQ::kWaiting).size(), kWaitingSources[i]) << all[i].name;
    EXPECT_TRUE(all[i].needs(DialectQ::kWaiting));
    EXPECT_EQ(findMetricDialect(all[i].name), &all[i]);
  }
  EXPECT_EQ(findMetricDialect("trtllm")->of(DialectQ::kKvUsage).size(), 2u);
  EXPECT_EQ(findMetricDialect("trtllm")->of(DialectQ::kKvCapacityTokens).size(), 1u);
  EXPECT_TRUE(findMetricDialect("tgi")->of(DialectQ::kKvUsage).empty());
  EXPECT_EQ(findMetricDialect("nope"), nullptr);
  EXPECT_EQ(dialectQuantityFromString("kvCapacityTokens"), DialectQ::kKvCapacityTokens);
  EXPECT_FALSE(dialectQuantityFromString("kv").has_value());
}

TEST(MetricDialectConfigTest, ReadsADialectFile) {
  const MetricDialectsLoad load = parseMetricDialects(R"({"dialects": [
    {"name": "my-engine", "waiting": "my_queue{pool=\"a\"}",
     "running": ["my_running", "my_active"],
     "kvUsage": "my_kv_used / my_kv_total"}]})");
  ASSERT_TRUE(load.ok()) << load.errors.front();
  ASSERT_EQ(load.dialects.size(), 1u);
  const MetricDialect& d = load.dialects[0];
  EXPECT_EQ(d.name, "my-engine");
  EXPECT_EQ(d.of(DialectQuantity::kRunning).size(), 2u);
  EXPECT_TRUE(d.needs(DialectQuantity::kKvUsage));  // every quantity named is required
  EXPECT_TRUE(d.needs(DialectQuantity::kRunning));
  const ParsedPrometheusText p =
      parsePrometheusText("my_queue{pool=\"a\"} 3\nmy_active 2\nmy_kv_used 30\nmy_kv_total 120\n");
  const DialectReading r = readMetricDialect(d, p);
  EXPECT_TRUE(r.complete(d));
  EXPECT_EQ(r.get(DialectQuantity::kRunning), 2.0);
  EXPECT_EQ(r.get(DialectQuantity::kKvUsage), 0.25);
}

TEST(MetricDialectConfigTest, EveryProblemHasItsPath) {
  const MetricDialectsLoad load = parseMetricDialects(R"({"dialects": [
    {"name": "sglang", "waiting": ["q", 3], "kvUsage": "kv{", "colour": 1},
    {"running": "r", "required": ["running", "latency", "slots"]}]})");
  EXPECT_TRUE(load.dialects.empty());
  const std::vector<std::string> expected = {
      "/dialects/0/colour: unknown key (allowed: name, waiting, running, kvUsage, "
      "kvCapacityTokens, slots, required)",
      "/dialects/0/kvUsage: \"kv{\" at 3: expected a label name",
      "/dialects/0/name: \"sglang\" is already a dialect's name",
      "/dialects/0/waiting/1: a string is required",
      "/dialects/1/required/1: \"latency\" is not one of waiting, running, kvUsage, "
      "kvCapacityTokens, slots",
      "/dialects/1/name: required",
      "/dialects/1/waiting: required (the queue holdback gates on)",
      "/dialects/1/required: \"slots\" is required but no metric is named for it",
  };
  EXPECT_EQ(load.errors, expected);
  EXPECT_EQ(parseMetricDialects("{").errors, std::vector<std::string>{": not valid JSON"});
  EXPECT_EQ(parseMetricDialects("[]").errors,
            std::vector<std::string>{"/dialects: an array of dialects is required"});
}

}  // namespace
}  // namespace holdback
