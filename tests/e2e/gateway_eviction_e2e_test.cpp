// End to end, in-flight eviction (docs/guide/eviction.md, docs/guide/gateway.md "In-flight
// eviction"): holdback-gateway with `flowControl.enableEviction: true` in front of two
// holdback-model-server processes, on loopback.
//
//   0. unloaded: interactive requests alone -> their median latency (the baseline B);
//   1. eviction gateway: a batch flood fills every slot of the pool (12 closed-loop batch clients
//      for 8 slots; batch is not held back: static-usage-limit-policy, threshold 1.0, upstream's
//      recommended static-1.0+evict), then two bursts of 4 interactive requests at once arrive:
//        a. every interactive request is served (200, complete stream) within
//           bound = 2 B + 4 x (grace + 50 ms) (stop-and-wait frees one slot per decision here:
//           the pool is exactly at its ceiling, so each decision revokes one lease);
//        b. evictions happened, and every evicted client got exactly one reply: a request
//           revoked before its response head went out (any non-streaming one, and a streaming
//           one revoked before its stream started) a 429 with drop reason `evicted` and the
//           OpenAI-style JSON body, a streaming one revoked mid-stream its 200 stream ended by
//           one error event (no [DONE]); nothing else but
//           200 (no transport error; the next request on the same keep-alive connection works);
//        c. the model servers prove the upstream aborts: their completed-request counters equal
//           the 200s (no evicted request ran to its end), the tokens they generated for evicted
//           requests are fewer than those requests asked for, and both are idle at once after
//           the drain;
//        d. the gateway's /metrics: revocations issued = actuated + too late, all confirmed
//           (none timed out), the gateway's actuated count = the evicted replies the clients
//           saw; `promtool check metrics` passes when promtool is installed;
//   1b. churn: batch clients that hang up after 1 s while interactive bursts keep evicting
//      (revocations racing with hang-ups and completions): interactive all served; the books
//      balance (no lease left, ends = starts, every revocation confirmed or too late, none lost);
//   2. control: the same flood and one burst through a gateway without eviction: the interactive
//      median exceeds the bound (batch requests run 3 s), so the bound is one that eviction meets.
//
// Sizing (model servers: 4 slots, 10 ms per token, 20 ms prefill, KV large enough not to bind):
//   interactive = 8 output tokens (~110 ms); batch = 300 output tokens (~3 s).
//   Detector: utilization with the slot term (maxRunningRequests 4) corrected between scrapes by
//   the dispatch ledger, so an aborted request's slot shows as free at once; hence the
//   confirmation grace of 100 ms (a few 25 ms scrape intervals) instead of the default derived
//   for a lagging sensor (scrape interval + staleness threshold + 250 ms).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

constexpr int kEvictionBatchClients = 12;  // 8 slots in the pool: 4 more wait in the gateway
constexpr int kEvictionBatchTokens = 300;
constexpr int kEvictionInteractiveTokens = 8;
constexpr int kBurst = 4;
constexpr auto kGrace = 100ms;

std::string evictionGatewayConfig(bool eviction) {
  return R"({
  "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
  "kind": "EndpointPickerConfig",
  "featureGates": ["flowControl"],
  "plugins": [
    {"type": "static-usage-limit-policy", "name": "policy", "parameters": {"threshold": 1.0}},
    {"type": "utilization-detector", "name": "vllm",
     "parameters": {"queueDepthThreshold": 8, "kvCacheUtilThreshold": 1.0,
                    "metricsStalenessThreshold": "400ms", "stalenessPolicy": "saturated",
                    "maxRunningRequests": 4}}
  ],
  "flowControl": {
    "usageLimitPolicyPluginRef": "policy",
    "saturationDetector": {"pluginRef": "vllm"},
    "defaultRequestTTL": "60s",
    "enableEviction": )" +
         std::string(eviction ? "true" : "false") + R"(,
    "eviction": {"confirmationGrace": "100ms"},
    "priorityBands": [{"priority": 10}, {"priority": -1}]
  }
})";
}

struct EvictionReply {
  int status = -1;  // -1: transport error
  std::string error;
  double ms = 0.0;
  std::string dropReason;
  std::string body;
  bool stream = false;
};

EvictionReply send(HttpClient& c, const std::string& objective, bool stream, int maxTokens,
                   const std::string& flow) {
  const std::string body = std::string(R"({"model": "fake-model", "prompt": "x", "max_tokens": )") +
                           std::to_string(maxTokens) + (stream ? R"(, "stream": true})" : "}");
  HttpHeaders headers{{"x-gateway-inference-objective", objective},
                      {"x-gateway-inference-fairness-id", flow}};
  EvictionReply r;
  r.stream = stream;
  const auto start = Clock::now();
  auto res = c.post("/v1/completions", body, "application/json", headers);
  r.ms = msSince(start);
  if (!res) {
    r.error = res.error();
    return r;
  }
  r.status = res->status;
  r.dropReason = res->header("x-llm-d-request-dropped-reason");
  r.body = res->body;
  return r;
}

// A streamed body cut by a revocation: some token events, then exactly one error event (429,
// evicted), and no [DONE].
bool endsWithOneEvictionEvent(const std::string& body) {
  const auto first = body.find("data: {\"error\"");
  if (first == std::string::npos || body.find("data: {\"error\"", first + 1) != std::string::npos)
    return false;
  if (body.find("data: [DONE]") != std::string::npos) return false;
  const std::string tail = body.substr(first);
  return tail.find("\"code\":429") != std::string::npos &&
         tail.find("evicted") != std::string::npos && tail.size() >= 2 &&
         tail.compare(tail.size() - 2, 2, "\n\n") == 0 &&
         tail.find("data: ", 6) == std::string::npos;  // the last event
}

struct PhaseResult {
  std::vector<EvictionReply> interactive;
  std::vector<EvictionReply> batch;
  bool filled = false;  // every slot was taken by batch before the first burst
};

class GatewayEvictionE2ETest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-gateway-eviction-e2e"); }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_a_.get(), server_b_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }

  std::unique_ptr<ChildProcess> startServer(const std::string& name) {
    return startModelServer(name, dir_, 100000);
  }

  std::unique_ptr<ChildProcess> startGateway(const std::string& name, bool eviction) {
    return startGatewayWith(name, dir_, evictionGatewayConfig(eviction),
                            {server_a_.get(), server_b_.get()});
  }

  int serversRunning() {
    int n = 0;
    for (auto* s : {server_a_.get(), server_b_.get()}) {
      n += int(metricValue(getMetrics(*s), "vllm:num_requests_running").value_or(0));
    }
    return n;
  }

  double serversSum(std::string_view name) {
    double n = 0;
    for (auto* s : {server_a_.get(), server_b_.get()}) n += metricSum(getMetrics(*s), name);
    return n;
  }

  bool waitServersIdle(std::chrono::milliseconds timeout) {
    return holdback_e2e::waitServersIdle({server_a_.get(), server_b_.get()}, timeout);
  }

  // The batch flood (half the clients streaming), `bursts` bursts of kBurst interactive
  // requests at once (the first once every slot is busy, the next 700 ms after the previous one
  // ended), then the drain: each batch client finishes the request it has in flight.
  PhaseResult phase(const ChildProcess& gw, int bursts) {
    PhaseResult out;
    std::mutex mu;
    std::atomic<bool> on{true};
    std::vector<std::thread> batch;
    for (int i = 0; i < kEvictionBatchClients; ++i) {
      batch.emplace_back([&, i] {
        std::this_thread::sleep_for(i * 5ms);
        auto c = clientFor(gw, 60s);
        while (on) {
          EvictionReply r =
              send(c, "batch", i % 2 == 1, kEvictionBatchTokens, "batch-" + std::to_string(i));
          std::lock_guard lock(mu);
          out.batch.push_back(std::move(r));
        }
      });
    }
    const auto fill_deadline = Clock::now() + 3s;
    while (Clock::now() < fill_deadline && serversRunning() < 8) std::this_thread::sleep_for(20ms);
    out.filled = serversRunning() == 8;
    std::this_thread::sleep_for(100ms);
    for (int b = 0; b < bursts; ++b) {
      if (b > 0) std::this_thread::sleep_for(700ms);
      std::vector<std::thread> burst;
      for (int i = 0; i < kBurst; ++i) {
        burst.emplace_back([&, i] {
          auto c = clientFor(gw);
          EvictionReply r =
              send(c, "interactive", true, kEvictionInteractiveTokens, "chat-" + std::to_string(i));
          std::lock_guard lock(mu);
          out.interactive.push_back(std::move(r));
        });
      }
      for (auto& t : burst) t.join();
    }
    on = false;
    for (auto& t : batch) t.join();
    return out;
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_a_, server_b_, gateway_;
};

TEST_F(GatewayEvictionE2ETest, InteractiveBurstEvictsBatchWithOneReplyEachAndUpstreamAborts) {
  server_a_ = startServer("model-server-a");
  server_b_ = startServer("model-server-b");
  ASSERT_TRUE(server_a_->startedOk()) << server_a_->error();
  ASSERT_TRUE(server_b_->startedOk()) << server_b_->error();
  gateway_ = startGateway("gateway-eviction", true);
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  std::this_thread::sleep_for(200ms);

  // Phase 0: unloaded baseline.
  std::vector<double> unloaded;
  {
    auto c = clientFor(*gateway_);
    for (int i = 0; i < 8; ++i) {
      const EvictionReply r = send(c, "interactive", true, kEvictionInteractiveTokens, "chat-0");
      ASSERT_EQ(r.status, 200) << r.error;
      unloaded.push_back(r.ms);
    }
  }
  const double baseline = median(unloaded);
  const double bound =
      2.0 * baseline + kBurst * std::chrono::duration<double, std::milli>(kGrace + 50ms).count();
  const double success0 = serversSum("vllm:request_success_total");
  const double tokens0 = serversSum("vllm:generation_tokens_total");

  // Phase 1: flood + bursts through the eviction gateway.
  const PhaseResult held = phase(*gateway_, 2);
  ASSERT_TRUE(held.filled) << "the batch flood never filled the 8 slots";
  ASSERT_TRUE(waitServersIdle(2s)) << "the model servers are still busy after the drain";
  std::vector<double> interactive_ms;
  int interactive_ok = 0;
  for (const EvictionReply& r : held.interactive) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    if (r.status != 200) continue;
    const SseSummary s = summarizeSse(r.body);
    EXPECT_TRUE(s.done && s.events == kEvictionInteractiveTokens) << r.body;
    EXPECT_LE(r.ms, bound) << "interactive request not served within the bound";
    interactive_ms.push_back(r.ms);
    ++interactive_ok;
  }
  int batch_ok = 0, evicted_json = 0, evicted_stream = 0, other = 0;
  for (const EvictionReply& r : held.batch) {
    if (r.status == 429) {
      const auto body = nlohmann::json::parse(r.body, nullptr, false);
      // Streamed or not: a request revoked before its response head went out (queued, or
      // between its dispatch and its upstream exchange) is answered with the JSON 429; only one
      // revoked mid-stream ends with an eviction event (below).
      const bool ok =
          r.dropReason == "evicted" && !body.is_discarded() && body["error"]["code"] == 429;
      EXPECT_TRUE(ok) << r.dropReason << " " << r.body;
      evicted_json += ok ? 1 : 0;
      continue;
    }
    if (r.status == 200 && r.stream) {
      const SseSummary s = summarizeSse(r.body);
      if (s.done && s.events == kEvictionBatchTokens) {
        ++batch_ok;
      } else {
        const bool ok = endsWithOneEvictionEvent(r.body);
        EXPECT_TRUE(ok) << "a streamed batch reply neither complete nor ended by one eviction "
                           "event: "
                        << r.body.substr(r.body.size() > 400 ? r.body.size() - 400 : 0);
        evicted_stream += ok ? 1 : 0;
      }
      continue;
    }
    if (r.status == 200) {
      ++batch_ok;
      continue;
    }
    ++other;
    ADD_FAILURE() << "batch reply " << r.status << " " << r.error << " " << r.body;
  }
  const int evicted = evicted_json + evicted_stream;
  const std::string m = getMetrics(*gateway_);
  const double issued = metricSum(m, "holdback_flow_control_revocations_issued_total");
  const double issued_batch =
      metricSum(m, "holdback_flow_control_revocations_issued_total", "priority=\"-1\"");
  const double confirmed =
      metricSum(m, "holdback_flow_control_revocations_total", "outcome=\"confirmed\"");
  const double timed_out =
      metricSum(m, "holdback_flow_control_revocations_total", "outcome=\"timed_out\"");
  const double actuated = metricSum(m, "holdback_gateway_evictions_total", "result=\"actuated\"");
  const double too_late = metricSum(m, "holdback_gateway_evictions_total", "result=\"too_late\"");
  const double success = serversSum("vllm:request_success_total") - success0;
  const double tokens = serversSum("vllm:generation_tokens_total") - tokens0;
  const double ok_tokens =
      double(batch_ok) * kEvictionBatchTokens + interactive_ok * kEvictionInteractiveTokens;
  std::printf(
      "[e2e-evict] unloaded interactive median %.1f ms; bound 2B + %d x (grace %lld + 50) ms = "
      "%.1f ms\n"
      "[e2e-evict] eviction: interactive median %.1f ms, max %.1f ms (n=%zu); batch %zu replies: "
      "%d x 200, %d evicted (429 %d, stream %d), %d other\n"
      "[e2e-evict] revocations issued %.0f (batch %.0f), confirmed %.0f, timed out %.0f; gateway "
      "actuated %.0f, too late %.0f; servers: %.0f completed (200s: %d), %.0f tokens generated "
      "beyond the 200s' %.0f for %d evicted requests of %d tokens\n",
      baseline, kBurst, static_cast<long long>(kGrace.count()), bound, median(interactive_ms),
      interactive_ms.empty() ? 0.0
                             : *std::max_element(interactive_ms.begin(), interactive_ms.end()),
      interactive_ms.size(), held.batch.size(), batch_ok, evicted, evicted_json, evicted_stream,
      other, issued, issued_batch, confirmed, timed_out, actuated, too_late, success,
      batch_ok + interactive_ok, tokens - ok_tokens, ok_tokens, evicted, kEvictionBatchTokens);
  // a. every interactive request served within the bound (checked per reply above).
  EXPECT_EQ(interactive_ok, 2 * kBurst);
  // b. evictions happened; each evicted client got one reply (429 or a terminated stream).
  EXPECT_GE(evicted, 1);
  EXPECT_LE(evicted, 4 * kBurst) << "runaway over-eviction";
  EXPECT_EQ(other, 0);
  // c. upstream aborts: no evicted request completed at its model server, and each generated
  // fewer tokens than it asked for.
  EXPECT_EQ(success, double(batch_ok + interactive_ok));
  EXPECT_GE(tokens, ok_tokens);
  EXPECT_LT(tokens - ok_tokens, double(evicted) * kEvictionBatchTokens);
  // d. the books balance.
  EXPECT_EQ(issued, issued_batch) << "only batch (priority < 0) may be revoked";
  EXPECT_EQ(issued, actuated + too_late) << m;
  EXPECT_EQ(actuated, double(evicted)) << m;
  EXPECT_EQ(confirmed, issued) << m;
  EXPECT_EQ(timed_out, 0.0) << m;
  // Exactly one release per lease: after the drain none is held, every started lease ended, the
  // revoked ones by their confirmation, the others released; none timed out or was reaped.
  const double leases_started = metricSum(m, "holdback_gateway_leases_started_total");
  EXPECT_EQ(metricSum(m, "holdback_gateway_leases_held"), 0.0) << m;
  EXPECT_EQ(leases_started, metricSum(m, "holdback_gateway_leases_ended_total")) << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_leases_ended_total", "end=\"revoked-confirmed\""),
            issued)
      << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_leases_ended_total", "end=\"released\""),
            leases_started - issued)
      << m;
  EXPECT_EQ(leases_started, double(held.batch.size() + held.interactive.size() + unloaded.size()))
      << "one lease per dispatched request";
  if (const auto r = promtoolCheck(m, dir_)) {
    EXPECT_EQ(r->status, 0) << r->report;
  } else {
    std::printf("[e2e-evict] SKIP promtool: not installed (Debian package prometheus)\n");
  }

  // Phase 1b: churn - revocations racing with client hang-ups. Every batch client gives up after
  // 1 s (its request runs 3 s: the gateway sees the hang-up and aborts upstream), while bursts of
  // interactive requests keep evicting. The races are not forced, only exercised; what must hold
  // whatever the interleaving: every interactive request is served, and the books balance (no
  // lease left, each ended once, every revocation confirmed, none timed out).
  {
    std::atomic<bool> on{true};
    std::vector<std::thread> batch;
    for (int i = 0; i < kEvictionBatchClients; ++i) {
      batch.emplace_back([&, i] {
        std::this_thread::sleep_for(i * 5ms);
        auto c = clientFor(*gateway_, 1s);
        while (on) send(c, "batch", i % 2 == 1, kEvictionBatchTokens, "batch-" + std::to_string(i));
      });
    }
    std::this_thread::sleep_for(300ms);
    std::mutex mu;
    std::vector<EvictionReply> churn_interactive;
    for (int b = 0; b < 6; ++b) {
      std::vector<std::thread> burst;
      for (int i = 0; i < kBurst; ++i) {
        burst.emplace_back([&, i] {
          auto c = clientFor(*gateway_);
          EvictionReply r =
              send(c, "interactive", true, kEvictionInteractiveTokens, "chat-" + std::to_string(i));
          std::lock_guard lock(mu);
          churn_interactive.push_back(std::move(r));
        });
      }
      for (auto& t : burst) t.join();
      std::this_thread::sleep_for(200ms);
    }
    on = false;
    for (auto& t : batch) t.join();
    for (const EvictionReply& r : churn_interactive) EXPECT_EQ(r.status, 200) << r.error << r.body;
    ASSERT_TRUE(waitServersIdle(3s)) << "the model servers are still busy after the churn";
    std::this_thread::sleep_for(100ms);  // the last aborted exchanges end their leases
    const std::string c = getMetrics(*gateway_);
    const double c_issued = metricSum(c, "holdback_flow_control_revocations_issued_total");
    std::printf(
        "[e2e-evict] churn: revocations issued %.0f (+%.0f), actuated %.0f, too late %.0f, "
        "upstream aborted for hang-ups %.0f, leases started %.0f\n",
        c_issued, c_issued - issued, metricSum(c, "holdback_gateway_evictions_total", "actuated"),
        metricSum(c, "holdback_gateway_evictions_total", "too_late"),
        metricSum(c, "holdback_gateway_upstream_aborted_total"),
        metricSum(c, "holdback_gateway_leases_started_total"));
    EXPECT_EQ(metricSum(c, "holdback_gateway_leases_held"), 0.0) << c;
    EXPECT_EQ(metricSum(c, "holdback_gateway_leases_started_total"),
              metricSum(c, "holdback_gateway_leases_ended_total"))
        << c;
    EXPECT_EQ(metricSum(c, "holdback_flow_control_revocations_total", "outcome=\"confirmed\""),
              c_issued)
        << c;
    EXPECT_EQ(c_issued, metricSum(c, "holdback_gateway_evictions_total")) << c;
    EXPECT_EQ(metricSum(c, "holdback_gateway_leases_ended_total", "end=\"reaped\""), 0.0);
  }

  // Phase 2: control - the same flood and one burst without eviction.
  const int status = gateway_->stop(std::chrono::milliseconds(8000));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  gateway_ = startGateway("gateway-control", false);
  ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
  std::this_thread::sleep_for(200ms);
  const PhaseResult control = phase(*gateway_, 1);
  ASSERT_TRUE(control.filled);
  std::vector<double> control_ms;
  for (const EvictionReply& r : control.interactive) {
    EXPECT_EQ(r.status, 200) << r.error;
    control_ms.push_back(r.ms);
  }
  for (const EvictionReply& r : control.batch) EXPECT_EQ(r.status, 200) << r.error << r.body;
  std::printf("[e2e-evict] control (no eviction): interactive median %.1f ms (n=%zu)\n",
              median(control_ms), control_ms.size());
  EXPECT_GT(median(control_ms), bound) << "the bound does not distinguish eviction from none";
  for (ChildProcess* p : {gateway_.get(), server_a_.get(), server_b_.get()}) {
    const int s = p->stop(std::chrono::milliseconds(8000));
    EXPECT_TRUE(WIFEXITED(s) && WEXITSTATUS(s) == 0) << p->name() << " wait status " << s;
  }
}

}  // namespace
}  // namespace holdback_e2e
