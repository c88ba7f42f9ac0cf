// Stats snapshots, the Prometheus rendering and the queue-wait histogram.
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FakeDetector;
using testing::FakeEndpoints;
using testing::FlowControllerTest;
using testing::holdbackPolicy;
using testing::Recorder;
using testing::request;
using testing::staticPolicy;
using Kind = DispatchResult::Kind;

TEST_F(FlowControllerTest, StatsAndPrometheus) {
  auto o = options(holdbackPolicy(0.4, 0.9));
  o.bands = {{.priority = 10, .maxRequests = 4}};
  o.maxRequests = 10;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 10, 0, 100), t0);
  fc->enqueue(request("a", 0, 0, 50), t0);
  detector->set(0.5);
  fc->dispatchCycle(t0);  // band 10 (0.9) dispatches
  fc->dispatchCycle(t0);  // band 0 (0.4) gated
  const auto stats = fc->stats();
  EXPECT_EQ(stats.queuedRequests, 1u);
  EXPECT_EQ(stats.queuedBytes, 50u);
  EXPECT_EQ(stats.cycles, 2u);
  EXPECT_EQ(stats.outcomes[0], 1u);
  EXPECT_EQ(stats.bands[1].gatedCycles, 1u);
  const std::string text = renderPrometheus(stats, "pool-a");
  EXPECT_NE(text.find("# TYPE holdback_flow_control_queue_size gauge\n"), std::string::npos);
  EXPECT_NE(
      text.find("holdback_flow_control_queue_size{priority=\"0\",fairness_id=\"a\",inference_pool="
                "\"pool-a\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("holdback_flow_control_queue_bytes{priority=\"0\",fairness_id=\"a\",inference_pool="
                "\"pool-a\"} 50\n"),
      std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_requests_total{outcome=\"Dispatched\",priority=\"10\","
                      "inference_pool=\"pool-a\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_pool_saturation{stage=\"effective\",inference_pool="
                      "\"pool-a\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_global_capacity_utilization_requests{inference_pool="
                      "\"pool-a\"} 0.1\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_capacity_utilization_requests{priority=\"10\","
                      "inference_pool=\"pool-a\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_gated_cycles_total{priority=\"0\",inference_pool="
                      "\"pool-a\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(text.find("global_capacity_utilization_bytes"), std::string::npos);  // no byte cap
  EXPECT_NE(text.find("# TYPE holdback_flow_control_request_queue_duration_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_request_queue_duration_seconds_bucket{outcome="
                      "\"Dispatched\",priority=\"10\",le=\"0.001\",inference_pool=\"pool-a\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("holdback_flow_control_request_queue_duration_seconds_count{outcome="
                      "\"Dispatched\",priority=\"0\",inference_pool=\"pool-a\"} 0\n"),
            std::string::npos);
  EXPECT_NE(renderPrometheus(stats, "a\"b").find("inference_pool=\"a\\\"b\""), std::string::npos);
}

TEST_F(FlowControllerTest, QueueDurationHistogramCountsDispatchedWaits) {
  auto o = options();
  o.defaultRequestTtl = 0s;  // no TTL: the 2 h wait below is dispatched, not evicted
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("a", 0), t0);
  fc->dispatchCycle(t0);         // 0 s: first bucket (<= 1 ms)
  fc->dispatchCycle(t0 + 30ms);  // (25 ms, 50 ms]
  fc->dispatchCycle(t0 + 2h);    // above 60 s: +Inf only
  const BandStats b = fc->stats().bands[0];
  EXPECT_EQ(b.queueDurationBuckets[0], 1u);
  EXPECT_EQ(b.queueDurationBuckets[4], 1u);
  EXPECT_EQ(b.queueDurationBuckets[kQueueDurationBucketsSeconds.size()], 1u);
  EXPECT_DOUBLE_EQ(b.queueDurationSumSeconds, 0.03 + 7200.0);
}

}  // namespace
}  // namespace holdback
