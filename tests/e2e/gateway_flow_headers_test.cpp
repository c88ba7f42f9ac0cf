// holdback-gateway and upstream's newer flow-control headers: x-llm-d-inference-ttl (the caller's
// queue budget, which can only shorten the configured ones) and its band's TTL; the advisory
// x-llm-d-flow-band-headroom-requests on proxied responses. One
// model server, a concurrency detector admitting one request at a time, so that a second request
// queues behind a long one.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

const std::string kFlowHeadersConfig = R"({
  "apiVersion": "llm-d.ai/v1alpha1",
  "kind": "EndpointPickerConfig",
  "featureGates": ["flowControl"],
  "plugins": [{"name": "one-at-a-time", "type": "concurrency-detector",
               "parameters": {"concurrencyMode": "requests", "maxConcurrency": 1}},
              {"name": "static", "type": "static-usage-limit-policy"}],
  "flowControl": {
    "usageLimitPolicyPluginRef": "static",
    "saturationDetector": {"pluginRef": "one-at-a-time"},
    "defaultRequestTTL": "30s",
    "defaultPriorityBand": {"maxRequests": 4},
    "priorityBands": [{"priority": 10, "defaultRequestTTL": "300ms"}]
  }
})";

class GatewayFlowHeadersE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-flow-headers-e2e");
    server_ = startModelServer("model-server-headers", dir_, 100000);
    ASSERT_TRUE(server_->startedOk()) << server_->error();
    gateway_ = startGatewayWith("gateway-headers", dir_, kFlowHeadersConfig, {server_.get()});
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
    std::this_thread::sleep_for(200ms);  // a scrape or two
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }

  // A long request (about 1.5 s: 150 tokens at 10 ms) holding the one slot, sent on its own
  // connection; returns once the gateway has dispatched it.
  std::future<int> occupy() {
    auto done = std::async(std::launch::async, [this] {
      auto c = clientFor(*gateway_);
      auto r = c.post("/v1/completions",
                      R"({"model": "fake-model", "prompt": "hold", "max_tokens": 150})",
                      "application/json", {{"x-gateway-inference-fairness-id", "holder"}});
      return r ? r->status : -1;
    });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline &&
           metricValue(getMetrics(*server_), "vllm:num_requests_running").value_or(0) < 1) {
      std::this_thread::sleep_for(10ms);
    }
    return done;
  }

  HttpResult queued(const HttpHeaders& headers) {
    auto c = clientFor(*gateway_);
    return c.post("/v1/completions", R"({"model": "fake-model", "prompt": "q", "max_tokens": 2})",
                  "application/json", headers);
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_, gateway_;
};

TEST_F(GatewayFlowHeadersE2ETest, RequestTtlHeaderShortensTheQueueBudget) {
  auto holder = occupy();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = queued({{"x-llm-d-inference-ttl", "250ms"}});
  const double waited = msSince(t0);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->header("x-llm-d-request-dropped-reason"), "rejected-ttl-expired");
  EXPECT_TRUE(isOpenAiErrorBody(r->body)) << r->body;
  EXPECT_LT(waited, 1400.0);  // shed by its own 250 ms, not after the holder's 1.5 s
  EXPECT_EQ(holder.get(), 200);
}

TEST_F(GatewayFlowHeadersE2ETest, BandTtlWinsOverALooserHeader) {
  auto holder = occupy();
  // Priority 10 (objective "interactive") has a 300 ms band TTL; the header asks for 20 s.
  auto r =
      queued({{"x-gateway-inference-objective", "interactive"}, {"x-llm-d-inference-ttl", "20s"}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->header("x-llm-d-request-dropped-reason"), "rejected-ttl-expired");
  EXPECT_EQ(holder.get(), 200);
  // With the slot free the same request is served.
  auto ok =
      queued({{"x-gateway-inference-objective", "interactive"}, {"x-llm-d-inference-ttl", "20s"}});
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(GatewayFlowHeadersE2ETest, InvalidTtlHeaderIs400NamingTheHeader) {
  for (const char* bad : {"soon", "0s", "-1s", "15"}) {
    auto r = queued({{"x-llm-d-inference-ttl", bad}});
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
    EXPECT_TRUE(isOpenAiErrorBody(r->body)) << r->body;
    EXPECT_NE(r->body.find("x-llm-d-inference-ttl"), std::string::npos) << r->body;
  }
}

TEST_F(GatewayFlowHeadersE2ETest, BandHeadroomHeaderCountsTheRoomLeftInTheBand) {
  auto alone = queued({});
  ASSERT_TRUE(alone) << alone.error();
  ASSERT_EQ(alone->status, 200) << alone->body;
  EXPECT_EQ(alone->header("x-llm-d-flow-band-headroom-requests"), "4");  // band 0 holds 4

  // The holder's response head goes out while two requests wait behind it: 4 - 2.
  auto holder = std::async(std::launch::async, [this] {
    auto hc = clientFor(*gateway_);
    return hc.post("/v1/completions",
                   R"({"model": "fake-model", "prompt": "hold", "max_tokens": 100})",
                   "application/json", {});
  });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline &&
         metricValue(getMetrics(*server_), "vllm:num_requests_running").value_or(0) < 1) {
    std::this_thread::sleep_for(10ms);
  }
  auto w1 = std::async(std::launch::async, [this] { return queued({}); });
  auto w2 = std::async(std::launch::async, [this] { return queued({}); });
  const auto queued_deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < queued_deadline &&
         metricSum(getMetrics(*gateway_), "holdback_flow_control_queue_size", "priority=\"0\"") <
             2) {
    std::this_thread::sleep_for(10ms);
  }
  auto h = holder.get();
  ASSERT_TRUE(h) << h.error();
  ASSERT_EQ(h->status, 200) << h->body;
  EXPECT_EQ(h->header("x-llm-d-flow-band-headroom-requests"), "2");
  for (auto* w : {&w1, &w2}) {
    auto r = w->get();
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_TRUE(r->hasHeader("x-llm-d-flow-band-headroom-requests"));
  }
}

}  // namespace
}  // namespace holdback_e2e
