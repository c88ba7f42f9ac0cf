// End to end, the gateway's defaults against a static-threshold control (docs/guide/gateway.md,
// "The default configuration"): two holdback-model-server processes, a closed-loop batch flood and
// an open-loop interactive stream (one request every 40 ms), first through a gateway with its
// built-in configuration and no capacity flags (slots estimated from the scrapes, KV capacity
// from vllm:cache_config_info), then through a control gateway with static-usage-limit-policy at
// threshold 1.0 (same detector, no eviction). Two pools:
//   slot-bound: 2 x 4 slots, KV that never binds; batch requests of 48 tokens (~0.5 s);
//   KV-bound:   2 x 8 slots, 1000 KV tokens each, filled by 4 long batch requests per server
//               (248 output tokens, ~2.5 s, 249 KV tokens each).
// What must hold (the gateway issue's targets, with the figures printed):
//   - interactive p99 latency <= 0.5 x the control's;
//   - the pool stays busy: the servers' mean running requests while the interactive stream runs
//     >= 0.8 x the control's (a slot idle while batch waits is capacity thrown away);
//   - every interactive request is answered 200, and no batch request gets anything but 200 or
//     an eviction's 429.
// The first two are asserted in the ordinary build only (kCapAssertTargets).
// The slot-bound test takes about 17 s, the KV-bound one about 25 s. Tuning runs:
// HOLDBACK_CAPACITY_E2E_CONFIG=FILE runs the treatment gateway with --config FILE instead of its
// built-in config, HOLDBACK_CAPACITY_E2E_ARGS adds flags to it (space-separated),
// HOLDBACK_CAPACITY_E2E_REQUESTS sets the interactive count
// (scripts/dev/gateway-capacity-targets.sh).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using CapClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct CapacityPoolShape {
  const char* name;
  int slots;
  int kvTokens;
  int batchTokens;
  int batchClients;
};

constexpr CapacityPoolShape kSlotBound{"slot-bound", 4, 100000, 48, 16};
constexpr CapacityPoolShape kKvBound{"kv-bound", 8, 1000, 248, 16};
constexpr int kCapInteractiveTokens = 8;
constexpr auto kCapInteractiveGap = 40ms;

// Under AddressSanitizer (scripts/test.sh builds it Debug, several times slower) the two latency
// and busy-pool targets are printed, not asserted: the slower gateway and servers widen the race
// behind the stall in docs/performance/gateway.md ("A stall on a KV-bound pool"), which then misses
// the p99 target in about one run in seven (one in about 24 in the ordinary build). The ordinary
// suite asserts them; every run still asserts the statuses.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCapAssertTargets = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCapAssertTargets = false;
#else
constexpr bool kCapAssertTargets = true;
#endif
#else
constexpr bool kCapAssertTargets = true;
#endif

std::string capEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// The nearest-rank percentile p (0..100) of `v`; 0 for an empty one.
double capPercentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size(), std::max<std::size_t>(rank, 1)) - 1];
}

struct CapRunResult {
  std::vector<double> interactiveMs;
  int interactiveNot200 = 0;
  double meanRunning = 0.0;
  int batchOk = 0;
  int batchEvicted = 0;
  int batchOther = 0;
};

int capPost(HttpClient& c, const std::string& objective, int maxTokens, const std::string& flow) {
  const std::string body = R"({"model": "fake-model", "prompt": ")" +
                           std::string(objective == "batch" ? "b" : "i") + R"(", "max_tokens": )" +
                           std::to_string(maxTokens) + "}";
  auto res = c.post(
      "/v1/completions", body, "application/json",
      {{"x-gateway-inference-objective", objective}, {"x-gateway-inference-fairness-id", flow}});
  return res ? res->status : -1;
}

class GatewayCapacityE2ETest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-gateway-capacity-e2e"); }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_a_.get(), server_b_.get()}) {
      if (p != nullptr) std::cerr << p->name() << ":\n" << p->stderrTail() << "\n";
    }
  }

  void startServers(const CapacityPoolShape& shape) {
    for (auto* s : {&server_a_, &server_b_}) {
      *s = std::make_unique<ChildProcess>(
          s == &server_a_ ? "model-server-a" : "model-server-b",
          std::vector<std::string>{HOLDBACK_MODEL_SERVER, "--port", "0", "--slots",
                                   std::to_string(shape.slots), "--token-ms", "10", "--prefill-ms",
                                   "20", "--kv-capacity-tokens", std::to_string(shape.kvTokens)},
          dir_);
      ASSERT_TRUE((*s)->startedOk()) << (*s)->error();
    }
  }

  // The gateway under test: its defaults (no --config) unless the tuning variables say otherwise;
  // or the control (static threshold 1.0).
  void startGateway(bool control) {
    std::vector<std::string> argv{HOLDBACK_GATEWAY, "--endpoint", server_a_->url(), "--endpoint",
                                  server_b_->url(), "--listen",   "127.0.0.1:0"};
    // The control: static threshold 1.0 over the default config's detector and bands.
    const std::string config =
        control ? std::string(HOLDBACK_E2E_CONFIGS_DIR) + "/static-1.0-gateway.yaml"
                : capEnv("HOLDBACK_CAPACITY_E2E_CONFIG");
    if (!config.empty()) {
      argv.push_back("--config");
      argv.push_back(config);
    }
    if (!control) {
      std::istringstream extra(capEnv("HOLDBACK_CAPACITY_E2E_ARGS"));
      for (std::string a; extra >> a;) argv.push_back(a);
    }
    gateway_ = std::make_unique<ChildProcess>(control ? "gateway-control" : "gateway-default",
                                              std::move(argv), dir_);
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  }

  double serversRunning() {
    double n = 0;
    for (auto* s : {server_a_.get(), server_b_.get()}) {
      n += metricSum(getMetrics(*s), "vllm:num_requests_running");
    }
    return n;
  }

  // The batch flood, then (once the pool is full) the interactive stream; the servers' running
  // figures are sampled every 20 ms while the stream runs.
  CapRunResult run(const CapacityPoolShape& shape, int interactive) {
    CapRunResult out;
    std::mutex mu;
    std::atomic<bool> on{true};
    std::vector<std::thread> batch;
    for (int i = 0; i < shape.batchClients; ++i) {
      batch.emplace_back([&, i] {
        std::this_thread::sleep_for(i * 5ms);
        auto c = clientFor(*gateway_, 60s);
        while (on) {
          const int status = capPost(c, "batch", shape.batchTokens, "batch-" + std::to_string(i));
          std::lock_guard lock(mu);
          (status == 200 ? out.batchOk : status == 429 ? out.batchEvicted : out.batchOther) += 1;
          if (status != 200 && on) std::this_thread::sleep_for(20ms);  // no tight retry loop
        }
      });
    }
    std::this_thread::sleep_for(1500ms);  // the flood fills the pool (and the ledger learns it)
    std::atomic<bool> sampling{true};
    double running_sum = 0.0;
    int samples = 0;
    std::thread sampler([&] {
      while (sampling) {
        const double r = serversRunning();
        running_sum += r;
        ++samples;
        std::this_thread::sleep_for(20ms);
      }
    });
    std::vector<std::thread> stream;
    const auto start = CapClock::now();
    for (int i = 0; i < interactive; ++i) {
      stream.emplace_back([&, i] {
        std::this_thread::sleep_until(start + i * kCapInteractiveGap);
        auto c = clientFor(*gateway_, 30s);
        const auto t0 = CapClock::now();
        const int status = capPost(c, "interactive", kCapInteractiveTokens, "chat");
        const double ms = msSince(t0);
        std::lock_guard lock(mu);
        if (status == 200) {
          out.interactiveMs.push_back(ms);
        } else {
          ++out.interactiveNot200;
        }
      });
    }
    for (auto& t : stream) t.join();
    sampling = false;
    sampler.join();
    on = false;
    for (auto& t : batch) t.join();
    out.meanRunning = samples > 0 ? running_sum / samples : 0.0;
    return out;
  }

  void compare(const CapacityPoolShape& shape) {
    const std::string n = capEnv("HOLDBACK_CAPACITY_E2E_REQUESTS");
    const int interactive = n.empty() ? 120 : std::max(10, std::atoi(n.c_str()));
    startServers(shape);
    if (HasFatalFailure()) return;
    CapRunResult runs[2];
    for (const bool control : {false, true}) {
      startGateway(control);
      if (HasFatalFailure()) return;
      std::this_thread::sleep_for(200ms);
      runs[control ? 1 : 0] = run(shape, interactive);
      if (!control) {
        const std::string m = getMetrics(*gateway_);
        std::printf("[e2e-capacity] %s learned: slots %s, KV %s\n", shape.name,
                    std::to_string(metricSum(m, "holdback_gateway_endpoint_slots")).c_str(),
                    std::to_string(metricSum(m, "holdback_gateway_endpoint_kv_capacity_tokens",
                                             "source=\"cache_config_info\""))
                        .c_str());
      }
      const int status = gateway_->stop(8000ms);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      gateway_.reset();
      ASSERT_TRUE(waitServersIdle({server_a_.get(), server_b_.get()}, 10s));
    }
    const CapRunResult& d = runs[0];
    const CapRunResult& c = runs[1];
    const double d99 = capPercentile(d.interactiveMs, 99), c99 = capPercentile(c.interactiveMs, 99);
    std::printf(
        "[e2e-capacity] %s, %d interactive every %lld ms:\n"
        "  default: interactive p50 %.0f p99 %.0f max %.0f ms (non-200 %d); servers running %.2f "
        "mean; batch 200 %d, evicted %d, other %d\n"
        "  control: interactive p50 %.0f p99 %.0f max %.0f ms (non-200 %d); servers running %.2f "
        "mean; batch 200 %d, evicted %d, other %d\n"
        "  ratios: p99 %.2fx (target <= 0.5), running %.2fx (target >= 0.8)\n",
        shape.name, interactive, static_cast<long long>(kCapInteractiveGap.count()),
        capPercentile(d.interactiveMs, 50), d99, capPercentile(d.interactiveMs, 100),
        d.interactiveNot200, d.meanRunning, d.batchOk, d.batchEvicted, d.batchOther,
        capPercentile(c.interactiveMs, 50), c99, capPercentile(c.interactiveMs, 100),
        c.interactiveNot200, c.meanRunning, c.batchOk, c.batchEvicted, c.batchOther,
        c99 > 0 ? d99 / c99 : 0.0, c.meanRunning > 0 ? d.meanRunning / c.meanRunning : 0.0);
    EXPECT_EQ(d.interactiveNot200, 0);
    EXPECT_EQ(c.interactiveNot200, 0);
    EXPECT_EQ(d.batchOther, 0);
    EXPECT_EQ(c.batchOther, 0);
    if (!kCapAssertTargets) {
      std::printf("[e2e-capacity] AddressSanitizer build: the targets above are not asserted\n");
      return;
    }
    EXPECT_LE(d99, 0.5 * c99) << "interactive p99 not halved against the static control";
    EXPECT_GE(d.meanRunning, 0.8 * c.meanRunning) << "the pool idles while batch waits";
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_a_, server_b_, gateway_;
};

TEST_F(GatewayCapacityE2ETest, SlotBoundPoolDefaultsHalveInteractiveP99AndKeepThePoolBusy) {
  compare(kSlotBound);
}

TEST_F(GatewayCapacityE2ETest, KvBoundPoolDefaultsHalveInteractiveP99AndKeepThePoolBusy) {
  compare(kKvBound);
}

}  // namespace
}  // namespace holdback_e2e
