// The parser itself is tested in tests/metrics/prometheus_parser_test.cpp.
#include "vllm_telemetry.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace holdback::gateway {
namespace {

TEST(VllmTelemetry, ReadsTheThreeGauges) {
  const ParsedPrometheusText m = parsePrometheusText(
      "vllm:num_requests_waiting{model_name=\"a\"} 2\n"
      "vllm:num_requests_running{model_name=\"a\"} 4\n"
      "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.5\n"
      "vllm:gpu_cache_usage_perc{model_name=\"a\"} 0.9\n"
      "vllm:num_requests_waiting_total 100\n");
  std::string missing;
  const auto t = extractVllmTelemetry(m, &missing);
  ASSERT_TRUE(t.has_value()) << missing;
  EXPECT_EQ(t->waiting, 2.0);
  EXPECT_EQ(t->running, 4.0);
  EXPECT_EQ(t->kvCacheUsage, 0.5);  // the current name wins over the deprecated one
}

TEST(VllmTelemetry, FallsBackToGpuCacheUsage) {
  const auto t = extractVllmTelemetry(
      parsePrometheusText("vllm:num_requests_waiting 0\nvllm:gpu_cache_usage_perc 0.3\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kvCacheUsage, 0.3);
  EXPECT_EQ(t->running, 0.0);
}

TEST(VllmTelemetry, SumsQueuesAndTakesTheFullestCacheAcrossModels) {
  const auto t =
      extractVllmTelemetry(parsePrometheusText("vllm:num_requests_waiting{model_name=\"a\"} 1\n"
                                               "vllm:num_requests_waiting{model_name=\"b\"} 2\n"
                                               "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.7\n"
                                               "vllm:kv_cache_usage_perc{model_name=\"b\"} 0.2\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->waiting, 3.0);
  EXPECT_EQ(t->kvCacheUsage, 0.7);
}

TEST(VllmTelemetry, NaNIsKeptSoTheDetectorSeesInvalidTelemetry) {
  const auto t =
      extractVllmTelemetry(parsePrometheusText("vllm:num_requests_waiting 1\n"
                                               "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.9\n"
                                               "vllm:kv_cache_usage_perc{model_name=\"b\"} NaN\n"
                                               "vllm:kv_cache_usage_perc{model_name=\"c\"} 0.1\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(std::isnan(t->kvCacheUsage));
}

TEST(VllmTelemetry, MissingGaugesAreReportedNotZero) {
  std::string missing;
  EXPECT_FALSE(
      extractVllmTelemetry(parsePrometheusText("vllm:kv_cache_usage_perc 0.1\n"), &missing));
  EXPECT_EQ(missing, "vllm:num_requests_waiting");
  EXPECT_FALSE(
      extractVllmTelemetry(parsePrometheusText("vllm:num_requests_waiting 0\n"), &missing));
  EXPECT_NE(missing.find("vllm:kv_cache_usage_perc"), std::string::npos);
  EXPECT_FALSE(extractVllmTelemetry(parsePrometheusText("<html>not metrics</html>\n")));
}

}  // namespace
}  // namespace holdback::gateway
