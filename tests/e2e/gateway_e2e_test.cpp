// End to end: holdback-gateway in front of two holdback-model-server processes, on loopback,
// driven by many concurrent HTTP clients (http_client.hpp). One test, in phases, all on the same
// processes:
//
//   0. unloaded: interactive requests alone -> their median latency (the baseline), and both
//      model servers take traffic;
//   1. batch flood through the holdback gateway (24 concurrent batch clients, 3x the 8 slots of
//      the pool) while interactive requests keep coming:
//        a. the interactive median stays <= 2 x baseline + 50 ms;
//        b. batch is held back (gateway queue gauge for priority -1 > 0, x-holdback-queued-ms
//           > 0 for most batch replies) and, once the flood stops, every batch request is
//           dispatched and completes with 200;
//   2. control: the same flood through a second gateway whose policy does not hold back
//      (static-usage-limit-policy, threshold 1.0): the interactive median exceeds that same bound,
//      so the bound of phase 1 is one that fails when batch takes the pool;
//   3. SIGKILL one model server: its metrics go stale, the gateway's saturation shows it
//      (stalenessPolicy "saturated" scores it 1.0), and every request sent after the staleness
//      threshold + slack is served by the survivor (x-holdback-endpoint);
//   d. throughout: every request sent got exactly one response (no transport error, no timeout).
//
// Sizing (model servers: 4 slots, 10 ms per token, 20 ms prefill, 200 KV tokens):
//   interactive = prompt "i" (1 token) + 8 output tokens:  90 ms of generation, 9 KV tokens;
//   batch       = prompt "b" (1 token) + 48 output tokens: 490 ms of generation, 49 KV tokens.
//   Detector: utilization, queueDepthThreshold 8, kvCacheUtilThreshold 1.0, so an endpoint's
//   score is max(waiting / 8, KV usage), and for the holdback gateway also running / 4 (the slot
//   term, corrected between scrapes by the dispatch ledger; see gatewayConfig). Holdback: batch
//   (-1) ceiling 0.4, interactive (10) 1.0: batch is gated once the pool's mean score reaches 0.4,
//   i.e. at 4 running batch sequences (4 * 49 / 200 / 2 = 0.49), which leaves about 2 of the 4
//   slots of each server free for interactive work. Without holdback (threshold 1.0) batch fills
//   all 8 slots and ~8 waiting per server before anything is gated, and interactive requests queue
//   behind it in the servers' FIFO queues (~1 s).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kBatchClients = 24;
constexpr int kInteractiveClients = 2;
constexpr int kInteractiveTokens = 8;
constexpr int kBatchTokens = 48;
constexpr auto kStaleness = 400ms;
constexpr auto kStalenessSlack = 600ms;  // a few scrape intervals + scheduling noise

// The policy/detector pair of the test; `holdback` false gives the control gateway.
std::string gatewayConfig(bool holdback) {
  const std::string policy = holdback ? R"({"type": "priority-holdback-policy", "name": "policy",
                     "parameters": {"strategy": "static", "ceilings": {"10": 1.0, "-1": 0.4}}})"
                                      : R"({"type": "static-usage-limit-policy", "name": "policy",
                     "parameters": {"threshold": 1.0}})";
  // The holdback gateway's detector also has the slot term (maxRunningRequests 4, the servers'
  // --slots): its score counts the gateway's dispatches since the last scrape as running through
  // the dispatch ledger. The KV figure alone (without it) lags: a batch sequence's KV grows
  // while it generates, so KV usage reads far below the final 49 tokens per sequence and batch
  // would fill the slots before the mean reached 0.4 (the gateway's former scrape-lag credit
  // hid this by counting every dispatch as waiting until the next scrape).
  const std::string slotTerm = holdback ? R"(, "maxRunningRequests": 4)" : "";
  return R"({
  "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
  "kind": "EndpointPickerConfig",
  "featureGates": ["flowControl"],
  "plugins": [
    )" + policy +
         R"(,
    {"type": "utilization-detector", "name": "vllm",
     "parameters": {"queueDepthThreshold": 8, "kvCacheUtilThreshold": 1.0,
                    "metricsStalenessThreshold": "400ms", "headroom": 0.2,
                    "stalenessPolicy": "saturated")" +
         slotTerm + R"(}}
  ],
  "flowControl": {
    "usageLimitPolicyPluginRef": "policy",
    "saturationDetector": {"pluginRef": "vllm"},
    "defaultRequestTTL": "60s",
    "priorityBands": [{"priority": 10}, {"priority": -1}]
  }
})";
}

struct Reply {
  int status = -1;  // -1: no response (transport error)
  std::string error;
  double ms = 0.0;
  double sentAtMs = 0.0;   // since the test's t0
  std::string endpoint;    // x-holdback-endpoint
  double queuedMs = -1.0;  // x-holdback-queued-ms, -1 when absent
  bool streamComplete = false;
};

// Every request the test sends goes through here: counts requests and replies per status.
class Traffic {
 public:
  explicit Traffic(Clock::time_point t0) : t0_(t0) {}

  Reply send(HttpClient& c, const std::string& objective, bool stream, int maxTokens,
             const std::string& flow) {
    const std::string body = std::string(R"({"model": "fake-model", "prompt": ")") +
                             (objective == "batch" ? "b" : "i") + R"(", "max_tokens": )" +
                             std::to_string(maxTokens) + (stream ? R"(, "stream": true})" : "}");
    HttpHeaders headers{{"x-gateway-inference-objective", objective},
                        {"x-gateway-inference-fairness-id", flow}};
    Reply r;
    const auto start = Clock::now();
    r.sentAtMs = msSince(t0_, start);
    ++sent_;
    auto res = c.post("/v1/completions", body, "application/json", headers);
    r.ms = msSince(start);
    std::lock_guard lock(mu_);
    if (!res) {
      r.error = res.error();
      ++transport_errors_;
      if (error_samples_.size() < 5) error_samples_.push_back(objective + ": " + r.error);
      return r;
    }
    r.status = res->status;
    ++statuses_[r.status];
    r.endpoint = res->header("x-holdback-endpoint");
    if (res->hasHeader("x-holdback-queued-ms")) {
      r.queuedMs = std::atof(res->header("x-holdback-queued-ms").c_str());
    }
    if (stream && r.status == 200) {
      const SseSummary s = summarizeSse(res->body);
      r.streamComplete = s.done && s.events == maxTokens;
    }
    return r;
  }

  int sent() const { return sent_; }
  int transportErrors() const {
    std::lock_guard lock(mu_);
    return transport_errors_;
  }
  int replies() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [status, count] : statuses_) n += count;
    return n;
  }
  std::string summary() const {
    std::lock_guard lock(mu_);
    std::string s = "sent " + std::to_string(sent_.load()) + ", transport errors " +
                    std::to_string(transport_errors_) + ", replies:";
    for (const auto& [status, count] : statuses_) {
      s += " " + std::to_string(status) + "x" + std::to_string(count);
    }
    for (const std::string& e : error_samples_) s += "\n  " + e;
    return s;
  }

 private:
  const Clock::time_point t0_;
  std::atomic<int> sent_{0};
  mutable std::mutex mu_;
  std::map<int, int> statuses_;
  int transport_errors_ = 0;
  std::vector<std::string> error_samples_;
};

// What one flood phase measured.
struct FloodResult {
  std::vector<double> interactiveMs;  // sent after the warm-up
  std::vector<Reply> batch;
  std::vector<Reply> interactive;
  double maxBatchQueued = 0.0;  // gateway queue gauge, priority -1
};

class GatewayE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-gateway-e2e");
    t0_ = Clock::now();
  }

  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), control_.get(), server_a_.get(), server_b_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }

  std::unique_ptr<ChildProcess> startServer(const std::string& name) {
    return startModelServer(name, dir_, 200);
  }

  std::unique_ptr<ChildProcess> startGateway(const std::string& name, bool holdback) {
    return startGatewayWith(name, dir_, gatewayConfig(holdback),
                            {server_a_.get(), server_b_.get()});
  }

  // Interactive requests alone, for `duration`.
  std::vector<Reply> interactiveOnly(const ChildProcess& gw, Traffic& traffic,
                                     std::chrono::milliseconds duration) {
    std::mutex mu;
    std::vector<Reply> replies;
    const auto end = Clock::now() + duration;
    std::vector<std::thread> threads;
    threads.reserve(kInteractiveClients);
    for (int i = 0; i < kInteractiveClients; ++i) {
      threads.emplace_back([&, i] {
        auto c = clientFor(gw);
        while (Clock::now() < end) {
          Reply r =
              traffic.send(c, "interactive", true, kInteractiveTokens, "chat-" + std::to_string(i));
          {
            std::lock_guard lock(mu);
            replies.push_back(r);
          }
          std::this_thread::sleep_for(30ms);
        }
      });
    }
    for (auto& t : threads) t.join();
    return replies;
  }

  // The batch flood with interactive traffic alongside: batch clients loop for `duration`, then
  // finish the request they have in flight (the drain); interactive latencies count once the
  // flood has been on for `warmup`.
  FloodResult flood(const ChildProcess& gw, Traffic& traffic, std::chrono::milliseconds duration,
                    std::chrono::milliseconds warmup) {
    FloodResult out;
    std::mutex mu;
    std::atomic<bool> on{true};
    const auto start = Clock::now();
    std::vector<std::thread> batch;
    batch.reserve(kBatchClients);
    for (int i = 0; i < kBatchClients; ++i) {
      batch.emplace_back([&, i] {
        // Spread the connects over 120 ms.
        std::this_thread::sleep_for(i * 5ms);
        auto c = clientFor(gw, 60s);
        while (on) {
          Reply r = traffic.send(c, "batch", false, kBatchTokens, "batch-" + std::to_string(i));
          std::lock_guard lock(mu);
          out.batch.push_back(r);
        }
      });
    }
    std::thread sampler([&] {
      while (on) {
        const std::string m = getMetrics(gw);
        const double queued = metricSum(m, "holdback_flow_control_queue_size", "priority=\"-1\"");
        {
          std::lock_guard lock(mu);
          out.maxBatchQueued = std::max(out.maxBatchQueued, queued);
        }
        std::this_thread::sleep_for(50ms);
      }
    });
    std::vector<std::thread> interactive;
    interactive.reserve(kInteractiveClients);
    for (int i = 0; i < kInteractiveClients; ++i) {
      interactive.emplace_back([&, i] {
        auto c = clientFor(gw);
        while (Clock::now() < start + duration) {
          const bool measured = Clock::now() >= start + warmup;
          Reply r =
              traffic.send(c, "interactive", true, kInteractiveTokens, "chat-" + std::to_string(i));
          std::lock_guard lock(mu);
          out.interactive.push_back(r);
          if (measured && r.status == 200) out.interactiveMs.push_back(r.ms);
          std::this_thread::sleep_for(30ms);
        }
      });
    }
    for (auto& t : interactive) t.join();
    std::this_thread::sleep_until(start + duration);
    on = false;
    sampler.join();
    for (auto& t : batch) t.join();
    return out;
  }

  bool waitServersIdle(std::chrono::milliseconds timeout) {
    return holdback_e2e::waitServersIdle({server_a_.get(), server_b_.get()}, timeout);
  }

  std::string dir_;
  Clock::time_point t0_;
  std::unique_ptr<ChildProcess> server_a_, server_b_, gateway_, control_;
};

TEST_F(GatewayE2ETest, HoldsBackBatchProtectsInteractiveAndRoutesAroundADeadServer) {
  server_a_ = startServer("model-server-a");
  server_b_ = startServer("model-server-b");
  ASSERT_TRUE(server_a_->startedOk()) << server_a_->error();
  ASSERT_TRUE(server_b_->startedOk()) << server_b_->error();
  gateway_ = startGateway("gateway-holdback", true);
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  Traffic traffic(t0_);

  // Phase 0: unloaded baseline (after a short warm-up so that scrapes have run).
  std::this_thread::sleep_for(200ms);
  const std::vector<Reply> unloaded = interactiveOnly(*gateway_, traffic, 1500ms);
  std::vector<double> unloaded_ms;
  std::map<std::string, int> unloaded_endpoints;
  for (const Reply& r : unloaded) {
    ASSERT_EQ(r.status, 200) << r.error << "\n" << traffic.summary();
    EXPECT_TRUE(r.streamComplete) << "a streamed reply lost tokens or [DONE]";
    unloaded_ms.push_back(r.ms);
    ++unloaded_endpoints[r.endpoint];
  }
  ASSERT_GE(unloaded_ms.size(), 6u);
  const double baseline = median(unloaded_ms);
  const double bound = 2.0 * baseline + 50.0;
  EXPECT_EQ(unloaded_endpoints.count(server_a_->url()), 1u) << "server A never picked";
  EXPECT_EQ(unloaded_endpoints.count(server_b_->url()), 1u) << "server B never picked";

  // Phase 1: batch flood through the holdback gateway.
  const FloodResult held = flood(*gateway_, traffic, 4000ms, 1000ms);
  const double held_median = median(held.interactiveMs);
  std::vector<double> batch_queued;
  int batch_ok = 0;
  for (const Reply& r : held.batch) {
    if (r.status == 200) ++batch_ok;
    batch_queued.push_back(r.queuedMs);
  }
  const auto queued_long =
      std::count_if(batch_queued.begin(), batch_queued.end(), [](double q) { return q > 50.0; });
  std::printf(
      "[e2e] unloaded interactive median %.1f ms (n=%zu); bound 2x+50 = %.1f ms\n"
      "[e2e] holdback flood: interactive median %.1f ms (n=%zu); batch %zu replies, %d x 200, "
      "queued-ms median %.0f, %ld of them > 50 ms; gateway batch queue max %.0f\n",
      baseline, unloaded_ms.size(), bound, held_median, held.interactiveMs.size(),
      held.batch.size(), batch_ok, median(batch_queued), static_cast<long>(queued_long),
      held.maxBatchQueued);
  // a. interactive latency stays close to unloaded.
  ASSERT_GE(held.interactiveMs.size(), 8u);
  EXPECT_LE(held_median, bound) << "interactive requests were not protected from the flood";
  for (const Reply& r : held.interactive) {
    EXPECT_EQ(r.status, 200) << r.error;
    if (r.status == 200) {
      EXPECT_TRUE(r.streamComplete);
    }
  }
  // b. batch was held back at the gateway, then every gated request was dispatched: all 200.
  EXPECT_GE(held.maxBatchQueued, 5.0) << "the gateway never queued batch requests";
  EXPECT_GE(queued_long * 2, static_cast<long>(held.batch.size()))
      << "most batch requests should have waited at the gateway";
  EXPECT_EQ(batch_ok, static_cast<int>(held.batch.size())) << traffic.summary();
  EXPECT_GE(held.batch.size(), static_cast<std::size_t>(kBatchClients));
  const std::string after_drain = getMetrics(*gateway_);
  EXPECT_EQ(metricSum(after_drain, "holdback_flow_control_queue_size"), 0.0) << after_drain;
  ASSERT_TRUE(waitServersIdle(10s));

  // Phase 2: control - the same flood through a gateway that does not hold back.
  control_ = startGateway("gateway-control", false);
  ASSERT_TRUE(control_->startedOk()) << control_->error();
  std::this_thread::sleep_for(200ms);
  const FloodResult control = flood(*control_, traffic, 3500ms, 1000ms);
  const double control_median = median(control.interactiveMs);
  int control_batch_ok = 0;
  for (const Reply& r : control.batch) control_batch_ok += r.status == 200 ? 1 : 0;
  std::printf(
      "[e2e] control flood (no holdback): interactive median %.1f ms (n=%zu), batch %zu "
      "replies, %d x 200\n",
      control_median, control.interactiveMs.size(), control.batch.size(), control_batch_ok);
  ASSERT_GE(control.interactiveMs.size(), 2u);
  EXPECT_GT(control_median, bound) << "the bound does not distinguish holdback from none";
  EXPECT_EQ(control_batch_ok, static_cast<int>(control.batch.size())) << traffic.summary();
  const int control_status = control_->stop(std::chrono::milliseconds(8000));
  EXPECT_TRUE(WIFEXITED(control_status) && WEXITSTATUS(control_status) == 0) << control_status;
  ASSERT_TRUE(waitServersIdle(10s));

  // Phase 3: SIGKILL server B; traffic through the holdback gateway must move to A.
  const std::string before_kill = getMetrics(*gateway_);
  const std::string survivor = server_a_->url();
  // How old the gateway's view of B is when B dies, and whether its scrapes were succeeding:
  // the staleness path can only see B once that age reaches the threshold.
  const std::string b_label = "endpoint=\"" + server_b_->url() + "\"";
  const double b_age_at_kill_ms =
      1000.0 * metricValue(before_kill, "holdback_gateway_endpoint_metrics_age_seconds", b_label)
                   .value_or(-1.0);
  const double b_up_at_kill =
      metricValue(before_kill, "holdback_gateway_endpoint_up", b_label).value_or(-1.0);
  server_b_->signal(SIGKILL);
  const auto killed_at = Clock::now();
  const double killed_ms = msSince(t0_, killed_at);
  const auto saturation = [](const std::string& m) {
    return metricValue(m, "holdback_flow_control_pool_saturation", "stage=\"effective\"")
        .value_or(-1.0);
  };
  // When the detector first treats the dead server's metrics as stale (the gateway's per-endpoint
  // stale gauge; its score is then 1.0). Not the pool saturation crossing 0.5: with B's last
  // KV reading high (0.7 after the earlier phases) the traffic moving to A can lift the mean over
  // 0.5 before B is stale (seen at 41 and 47 ms after the kill).
  std::atomic<double> detected_ms{-1.0};
  std::atomic<bool> watching{true};
  std::thread detector_watch([&] {
    while (watching && detected_ms < 0) {
      if (metricValue(getMetrics(*gateway_), "holdback_gateway_endpoint_stale", b_label)
              .value_or(0.0) >= 1.0) {
        detected_ms = msSince(killed_at);
      }
      std::this_thread::sleep_for(10ms);
    }
  });
  std::vector<Reply> after;
  {
    auto c = clientFor(*gateway_, 10s);
    while (Clock::now() < killed_at + kStaleness + kStalenessSlack + 1500ms) {
      after.push_back(traffic.send(c, "interactive", false, 2, "chat-0"));
      std::this_thread::sleep_for(10ms);
    }
  }
  watching = false;
  detector_watch.join();
  const std::string after_kill = getMetrics(*gateway_);
  const double moved_by =
      killed_ms + std::chrono::duration<double, std::milli>(kStaleness + kStalenessSlack).count();
  double last_bad = -1.0;
  int checked = 0;
  for (const Reply& r : after) {
    const bool good = r.status == 200 && r.endpoint == survivor;
    if (!good) last_bad = std::max(last_bad, r.sentAtMs - killed_ms);
    if (r.sentAtMs >= moved_by) {
      ++checked;
      EXPECT_TRUE(good) << "sent " << r.sentAtMs - killed_ms << " ms after the kill: status "
                        << r.status << " endpoint '" << r.endpoint << "' " << r.error;
    }
  }
  std::printf(
      "[e2e] kill: %zu requests after SIGKILL, last one not served by the survivor sent "
      "%.0f ms after the kill (-1: none) (threshold %lld ms + slack %lld ms); gateway saturation "
      "%.2f before, %.2f after; the detector saw the server stale %.0f ms after the kill "
      "(its metrics were %.0f ms old at the kill, up %.0f)\n",
      after.size(), last_bad, static_cast<long long>(kStaleness.count()),
      static_cast<long long>(kStalenessSlack.count()), saturation(before_kill),
      saturation(after_kill), detected_ms.load(), b_age_at_kill_ms, b_up_at_kill);
  ASSERT_GE(b_age_at_kill_ms, 0.0) << before_kill;
  EXPECT_GE(checked, 5);
  // The dead server's metrics are stale; "saturated" scores it 1.0, so the mean is >= 0.5.
  EXPECT_LT(saturation(before_kill), 0.5) << before_kill;
  EXPECT_GE(saturation(after_kill), 0.5) << after_kill;
  // ... and only once its last good scrape has aged past the threshold: B's metrics were
  // b_age_at_kill_ms old when the gateway was last asked before the kill (normally a scrape
  // interval or less; more when the machine is loaded), so the staleness path cannot see B
  // before threshold - that age (less 50 ms: the time from that read to the kill, and the
  // watcher's polling). Seeing it earlier would mean a failed scrape or a refused connection
  // closed B, not the staleness path.
  EXPECT_GE(detected_ms.load(), static_cast<double>(kStaleness.count()) - b_age_at_kill_ms - 50.0)
      << "B's metrics were " << b_age_at_kill_ms << " ms old at the kill, up " << b_up_at_kill
      << "\n"
      << before_kill;
  EXPECT_LE(detected_ms.load(), static_cast<double>((kStaleness + kStalenessSlack).count()));

  // d. every request got exactly one response, none timed out or was lost.
  std::printf("[e2e] %s\n", traffic.summary().c_str());
  EXPECT_EQ(traffic.transportErrors(), 0) << traffic.summary();
  EXPECT_EQ(traffic.replies(), traffic.sent()) << traffic.summary();

  // SIGTERM: every surviving process exits by itself with status 0 (under the sanitizers, a
  // leak or undefined behaviour in a child would show here as a non-zero status).
  for (ChildProcess* p : {gateway_.get(), server_a_.get()}) {
    const int status = p->stop(std::chrono::milliseconds(8000));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << p->name() << " wait status " << status;
  }
}

// program-aware-fairness through the gateway: the tokens served are reported for streamed
// responses too, exactly when the client asked for the usage event (stream_options.include_usage),
// else estimated (one token per event, the prompt as body bytes / 4), and for non-streamed ones.
TEST_F(GatewayE2ETest, ReportsServedTokensOfStreamedAndNonStreamedResponses) {
  server_a_ = startServer("model-server-tokens");
  ASSERT_TRUE(server_a_->startedOk()) << server_a_->error();
  const std::string config = R"({
  "apiVersion": "llm-d.ai/v1alpha1",
  "kind": "EndpointPickerConfig",
  "featureGates": ["flowControl"],
  "plugins": [{"type": "program-aware-fairness", "name": "programs",
               "parameters": {"lasHalfLifeSeconds": 0}}],
  "flowControl": {"defaultPriorityBand": {"fairnessPolicyRef": "programs"}}
})";
  gateway_ = startGatewayWith("gateway-tokens", dir_, config, {server_a_.get()});
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  std::this_thread::sleep_for(200ms);  // a scrape or two
  auto c = clientFor(*gateway_);
  const auto post = [&](const std::string& flow, const std::string& body) {
    auto res = c.post("/v1/completions", body, "application/json",
                      {{"x-gateway-inference-fairness-id", flow}});
    ASSERT_TRUE(res) << res.error();
    ASSERT_EQ(res->status, 200) << res->body;
  };
  const std::string streamed_no_usage =
      R"({"model": "fake-model", "prompt": "hello", "max_tokens": 6, "stream": true})";
  post("with-usage", R"({"model": "fake-model", "prompt": "hello", "max_tokens": 5,)"
                     R"( "stream": true, "stream_options": {"include_usage": true}})");
  post("no-usage", streamed_no_usage);
  post("whole", R"({"model": "fake-model", "prompt": "hello", "max_tokens": 7})");

  auto res = c.get("/debug/program-aware-fairness");
  ASSERT_TRUE(res && res->status == 200);
  const auto state = nlohmann::json::parse(res->body, nullptr, false);
  ASSERT_TRUE(state.is_object()) << res->body;
  std::map<std::string, double> service;
  std::map<std::string, std::uint64_t> requests;
  for (const auto& p : state["programs"]["programs"]) {
    service[p["id"].get<std::string>()] = p["attainedService"].get<double>();
    requests[p["id"].get<std::string>()] = p["requests"].get<std::uint64_t>();
  }
  ASSERT_EQ(requests["with-usage"], 1u) << res->body;
  ASSERT_EQ(requests["no-usage"], 1u) << res->body;
  ASSERT_EQ(requests["whole"], 1u) << res->body;
  // The server's usage: its prompt count + 2 x 5 completion tokens.
  const double prompt = service["with-usage"] - 10.0;
  EXPECT_GE(prompt, 1.0) << res->body;
  EXPECT_DOUBLE_EQ(service["whole"], prompt + 14.0) << res->body;
  // Estimated: 6 content events x 2 + body bytes / 4.
  EXPECT_DOUBLE_EQ(service["no-usage"], 12.0 + double(streamed_no_usage.size() / 4)) << res->body;
}

// A misbehaving model server next to two idle ones, through the gateway's BUILT-IN configuration
// (no --config): one server reports a deep waiting queue (--fake-waiting 50) or junk KV usage
// (--fake-kv 50, percent instead of a fraction) while it is actually idle. The detector's
// per-endpoint score cap and strict telemetry validation must keep the pool open: interactive
// and batch requests are served promptly, by the healthy servers (the misbehaving one is
// filtered out of the picks), with 200 and no queueing of note.
//
// Why three servers: with mean aggregation and the score cap (1.0), one endpoint of N moves the
// pool's saturation by at most 1/N. The built-in batch ceiling is 0.5 (stepwise-spread
// minCeiling), so one misbehaving endpoint next to idle ones keeps batch open iff 1/N < 0.5,
// i.e. N >= 3. With N = 2 the misbehaving endpoint is half of the pool: the pool reads
// (1.0 + s) / 2 >= 0.5 and batch is gated, as the policy says it should be when half of the
// capacity is gone (docs/guide/detectors.md, "The score cap"; the test below pins that too).
class GatewayMisbehavingServerE2ETest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-gateway-misbehaving-e2e"); }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), bad_.get(), good_.get(), good2_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }
  std::unique_ptr<ChildProcess> startServer(const std::string& name,
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
                                  "--kv-capacity-tokens",
                                  "200",
                                  "--model",
                                  "fake-model"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(name, std::move(argv), dir_);
  }
  // Starts the servers (the bad one and `healthy` good ones) and the gateway over them.
  // `config`: the gateway's --config (empty: its default).
  void startPool(int healthy, const std::string& config = "");
  void check(const std::string& objective);
  std::string dir_;
  std::unique_ptr<ChildProcess> bad_, good_, good2_, gateway_;
};

void GatewayMisbehavingServerE2ETest::startPool(int healthy, const std::string& config) {
  const std::string flag = GetParam();
  bad_ = startServer("bad", {flag, "50"});
  good_ = startServer("good", {});
  if (healthy > 1) good2_ = startServer("good2", {});
  std::vector<std::string> argv{HOLDBACK_GATEWAY, "--listen", "127.0.0.1:0", "--scrape-interval-ms",
                                "25"};
  for (ChildProcess* p : {bad_.get(), good_.get(), good2_.get()}) {
    if (p == nullptr) continue;
    ASSERT_TRUE(p->startedOk()) << p->stderrTail();
    argv.insert(argv.end(), {"--endpoint", p->url()});
  }
  // The misbehaviour is visible on the bad server's /metrics.
  const std::string gauge =
      flag == "--fake-kv" ? "vllm:kv_cache_usage_perc" : "vllm:num_requests_waiting";
  ASSERT_EQ(metricValue(getMetrics(*bad_), gauge).value_or(-1), 50.0);
  if (!config.empty()) argv.insert(argv.end(), {"--config", config});
  gateway_ = std::make_unique<ChildProcess>("gateway", std::move(argv), dir_);
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->stderrTail();
  std::this_thread::sleep_for(300ms);  // a few scrapes
}

// Over one misbehaving and two idle servers: runs 2 clients of `objective`, 6 requests each, one
// after the other, and checks that every one was served promptly by a healthy server.
void GatewayMisbehavingServerE2ETest::check(const std::string& objective) {
  startPool(2);
  if (HasFatalFailure()) return;

  const auto t0 = Clock::now();
  Traffic traffic(t0);
  std::mutex mu;
  std::vector<Reply> replies;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto c = clientFor(*gateway_, 5s);  // a gated request would wait the 30 s TTL
      for (int k = 0; k < 6; ++k) {
        Reply r =
            traffic.send(c, objective, false, kInteractiveTokens, "flow-" + std::to_string(i));
        std::lock_guard lock(mu);
        replies.push_back(r);
      }
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ(traffic.transportErrors(), 0) << traffic.summary();
  ASSERT_EQ(replies.size(), 12u);
  {
    for (const Reply& r : replies) {
      EXPECT_EQ(r.status, 200) << traffic.summary();
      // Generation takes 20 + 8 x 10 ms; "promptly"
      // leaves room for a loaded CI machine but not for a gated pool (30 s TTL, 429).
      EXPECT_LT(r.ms, 1500.0) << "sent at " << r.sentAtMs << " ms";
      EXPECT_NE(r.endpoint, bad_->url()) << "a request went to the misreporting server";
      EXPECT_TRUE(r.endpoint == good_->url() || r.endpoint == good2_->url()) << r.endpoint;
      EXPECT_LT(r.queuedMs, 500.0);
    }
  }
  // The gateway's pool saturation stays below the batch ceiling: the misbehaving endpoint counts
  // 1.0 of 3 (the overload shows only in its own score).
  const double saturation =
      metricValue(getMetrics(*gateway_), "holdback_gateway_pool_saturation").value_or(-1);
  EXPECT_GE(saturation, 0.0);
  EXPECT_LT(saturation, 0.5);
}

TEST_P(GatewayMisbehavingServerE2ETest, InteractiveIsServedByTheHealthyServers) {
  check("interactive");
}

TEST_P(GatewayMisbehavingServerE2ETest, BatchIsServedByTheHealthyServers) {
  check("batch");
}

// The bound of the 1/N rule of the stepwise policy (examples/configs/stepwise-gateway.yaml, the
// gateway's built-in config before the recommended one), pinned: with ONE idle server next to the
// misbehaving one the pool reads at least 0.5, the batch ceiling, so batch waits (here: past the
// client's 2 s timeout) while interactive (ceiling 1.0) is still served by the healthy server.
TEST_P(GatewayMisbehavingServerE2ETest, WithTwoServersBatchIsGatedButInteractiveIsServed) {
  startPool(1, HOLDBACK_E2E_CONFIGS_DIR "/stepwise-gateway.yaml");
  if (HasFatalFailure()) return;
  Traffic traffic(Clock::now());
  auto interactive = clientFor(*gateway_, 5s);
  const Reply served = traffic.send(interactive, "interactive", false, kInteractiveTokens, "i");
  EXPECT_EQ(served.status, 200) << traffic.summary();
  EXPECT_EQ(served.endpoint, good_->url());
  const double saturation =
      metricValue(getMetrics(*gateway_), "holdback_gateway_pool_saturation").value_or(-1);
  EXPECT_GE(saturation, 0.5);
  EXPECT_LT(saturation, 1.0);
  auto batch = clientFor(*gateway_, 2s);
  const Reply gated = traffic.send(batch, "batch", false, kInteractiveTokens, "b");
  EXPECT_NE(gated.status, 200) << "batch was admitted with the pool at " << saturation;
}

INSTANTIATE_TEST_SUITE_P(Misreporting, GatewayMisbehavingServerE2ETest,
                         ::testing::Values("--fake-waiting", "--fake-kv"), [](const auto& info) {
                           return std::string(info.param) == "--fake-kv" ? "JunkKvUsage"
                                                                         : "DeepWaitingQueue";
                         });

}  // namespace
}  // namespace holdback_e2e
