// The gateway against every metric dialect (docs/guide/engines.md): per dialect, two fake model
// servers speaking it (--dialect), one of them reporting a deep queue (and a KV figure) while idle.
// The gateway, left to detect the dialect, must show the served queue depth and KV usage on its
// per-endpoint gauges with the dialect label, keep both endpoints up, and gate on the deep queue
// as it does for vLLM: interactive served by the healthy server, batch held back (the pool reads
// at least the batch ceiling of 0.5). About 3 s per dialect.
//
// And a configured dialect naming metrics the server lacks stops the gateway at start-up with the
// flag in the message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

struct DialectE2ECase {
  const char* dialect;
  bool hasKv;
  // The engine's own capacity gauges the gateway learns from (no vllm:cache_config_info there):
  // the KV capacity (SGLang, TensorRT-LLM) and the slot count (TensorRT-LLM).
  bool kvFromMetric = false;
  bool slotsFromMetric = false;
};

class GatewayDialectE2ETest : public ::testing::TestWithParam<DialectE2ECase> {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-gateway-dialect-e2e"); }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), deep_.get(), idle_.get()}) {
      if (p != nullptr) std::cerr << p->name() << ": " << p->stderrTail() << "\n";
    }
  }
  std::unique_ptr<ChildProcess> dialectServer(const std::string& name,
                                              std::vector<std::string> extra) {
    std::vector<std::string> argv{HOLDBACK_MODEL_SERVER,
                                  "--port",
                                  "0",
                                  "--slots",
                                  "4",
                                  "--token-ms",
                                  "10",
                                  "--prefill-ms",
                                  "20",
                                  "--model",
                                  "fake-model",
                                  "--dialect",
                                  GetParam().dialect};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(name, std::move(argv), dir_);
  }
  // POST /v1/completions with `objective`; the status (-1: no response) and the endpoint.
  static std::pair<int, std::string> completeVia(const ChildProcess& gw,
                                                 const std::string& objective,
                                                 std::chrono::seconds timeout) {
    auto c = clientFor(gw, timeout);
    const auto res =
        c.post("/v1/completions", R"({"model": "fake-model", "prompt": "p", "max_tokens": 4})",
               "application/json", {{"x-gateway-inference-objective", objective}});
    if (!res) return {-1, res.error()};
    return {res->status, res->header("x-holdback-endpoint")};
  }
  std::string dir_;
  std::unique_ptr<ChildProcess> deep_, idle_, gateway_;
};

TEST_P(GatewayDialectE2ETest, DetectedGaugesShownAndBatchHeldBack) {
  const DialectE2ECase& c = GetParam();
  deep_ = dialectServer("deep", {"--fake-waiting", "50", "--fake-kv", "0.25"});
  idle_ = dialectServer("idle", {});
  ASSERT_TRUE(deep_->startedOk()) << deep_->error();
  ASSERT_TRUE(idle_->startedOk()) << idle_->error();
  gateway_ = std::make_unique<ChildProcess>(
      "gateway",
      // The stepwise configuration: batch's ceiling is 0.5, so the pool's saturation read
      // through the dialect gates it exactly as it would on vLLM.
      std::vector<std::string>{HOLDBACK_GATEWAY, "--config",
                               HOLDBACK_E2E_CONFIGS_DIR "/stepwise-gateway.yaml", "--listen",
                               "127.0.0.1:0", "--scrape-interval-ms", "25", "--endpoint",
                               deep_->url(), "--endpoint", idle_->url()},
      dir_);
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  std::this_thread::sleep_for(200ms);  // a few scrapes

  const std::string m = getMetrics(*gateway_);
  const std::string dialect = std::string("dialect=\"") + c.dialect + "\"";
  for (const ChildProcess* s : {deep_.get(), idle_.get()}) {
    const std::string label = "endpoint=\"" + s->url() + "\"," + dialect;
    EXPECT_EQ(metricValue(m, "holdback_gateway_endpoint_up", label), 1.0) << label << "\n" << m;
  }
  const std::string deep_label = "endpoint=\"" + deep_->url() + "\"," + dialect;
  EXPECT_EQ(metricValue(m, "holdback_gateway_endpoint_waiting_requests", deep_label), 50.0);
  EXPECT_EQ(metricValue(m, "holdback_gateway_endpoint_kv_cache_usage", deep_label),
            c.hasKv ? 0.25 : 0.0);
  EXPECT_NE(gateway_->stderrTail().find(std::string("detected dialect ") + c.dialect),
            std::string::npos);
  const std::string idle_endpoint = "endpoint=\"" + idle_->url() + "\"";
  if (c.kvFromMetric) {  // the servers' --kv-capacity-tokens default, 16384
    EXPECT_EQ(metricValue(m, "holdback_gateway_endpoint_kv_capacity_tokens",
                          idle_endpoint + ",source=\"metric\""),
              16384.0)
        << m;
  }
  if (c.slotsFromMetric) {  // --slots 4
    EXPECT_EQ(
        metricValue(m, "holdback_gateway_endpoint_slots", idle_endpoint + ",source=\"metric\""),
        4.0)
        << m;
  }

  // The deep queue scores 1.0 of 2: the pool reads >= 0.5, batch's ceiling.
  const double saturation =
      metricValue(getMetrics(*gateway_), "holdback_gateway_pool_saturation").value_or(-1);
  EXPECT_GE(saturation, 0.5);
  EXPECT_LT(saturation, 1.0);
  const auto [status, endpoint] = completeVia(*gateway_, "interactive", 5s);
  EXPECT_EQ(status, 200) << endpoint;
  EXPECT_EQ(endpoint, idle_->url());
  const auto [batch_status, batch_what] = completeVia(*gateway_, "batch", 1s);
  EXPECT_NE(batch_status, 200) << "batch admitted with the pool at " << saturation;
}

INSTANTIATE_TEST_SUITE_P(
    Engines, GatewayDialectE2ETest,
    ::testing::Values(DialectE2ECase{"vllm", true}, DialectE2ECase{"vllm-v0", true},
                      DialectE2ECase{"sglang", true, true}, DialectE2ECase{"llamacpp", true},
                      DialectE2ECase{"tgi", false}, DialectE2ECase{"trtllm", true, true, true}),
    [](const auto& info) {
      std::string name = info.param.dialect;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

TEST(GatewayDialectStartupE2ETest, ConfiguredDialectNamingAbsentMetricsStopsTheGateway) {
  const std::string dir = makeScratchDir("holdback-gateway-dialect-startup-e2e");
  ChildProcess server("vllm-server", {HOLDBACK_MODEL_SERVER, "--port", "0"}, dir);
  ASSERT_TRUE(server.startedOk()) << server.error();
  ChildProcess gateway(
      "gateway",
      {HOLDBACK_GATEWAY, "--listen", "127.0.0.1:0", "--endpoint", server.url(), "--dialect", "tgi"},
      dir, 5000ms);
  EXPECT_FALSE(gateway.startedOk());
  const auto status = gateway.waitExit(3000ms);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << *status;
  const std::string log = gateway.stderrTail();
  EXPECT_NE(log.find("--dialect tgi/waiting: none of tgi_queue_size is in the scrape"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("vllm:num_requests_waiting"), std::string::npos) << log;
}

}  // namespace
}  // namespace holdback_e2e
