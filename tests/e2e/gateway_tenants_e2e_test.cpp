// End to end, tenants and the admin listener (docs/guide/gateway.md "Tenants and API keys",
// "The admin listener"): holdback-gateway with --api-keys in front of one holdback-model-server
// (4 slots, 10 ms per token).
//
//   KeysAdminListenerAndReload (about 1 s): no key and a bad key get 401 with
//     `WWW-Authenticate: Bearer` and the JSON error body; a tenant's key is served and not passed
//     to the model server (its x-received-header-names hook); with --admin-listen the public
//     listener answers /metrics, /readyz and /debug 404 and /healthz 200, the admin one /metrics
//     200 and the API 404; SIGHUP reloads the key file (the old key 401, the new one served, the
//     tenant's counter kept), and a bad file on SIGHUP is reported and the previous keys kept.
//   ClampedClaimsRevokeNothing (about 2 s): the in-flight eviction setup of
//     gateway_eviction_e2e_test.cpp (static-usage-limit-policy at 1.0, eviction on) with the pool
//     full of a batch tenant's long requests; the same tenant's requests claiming `interactive`
//     are clamped to batch: no revocation while they wait (400 ms, where an interactive claim
//     revokes within a dispatch cycle), they are served only once a slot frees, and /metrics
//     counts them (clamped, and dispatched at priority -1, not 10); a real interactive tenant's
//     request then does revoke a batch request and is served at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
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

const std::string kBatchKey = "sk-batch-co-0123456789abcdef";
const std::string kBatchKeyRotated = "sk-batch-co-rotated-987654321";
const std::string kChatKey = "sk-chat-co-0123456789abcdef";

std::string keyFile(const std::string& batchKey) {
  return "tenants:\n"
         "  - name: batch-co\n"
         "    maxObjective: batch\n"
         "    keys: [" +
         batchKey +
         "]\n"
         "  - name: chat-co\n"
         "    maxObjective: interactive\n"
         "    keys: [" +
         kChatKey + "]\n";
}

// The eviction setup of gateway_eviction_e2e_test.cpp, for one server of 4 slots.
const std::string kEvictionConfig = R"({
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
    "enableEviction": true,
    "eviction": {"confirmationGrace": "100ms"},
    "priorityBands": [{"priority": 10}, {"priority": -1}]
  }
})";

struct TenantsReply {
  int status = -1;  // -1: transport error
  std::string error;
  std::string body;
  std::string wwwAuthenticate;
  std::string receivedHeaders;  // the model server's x-received-header-names
  std::string dropReason;
  double ms = 0.0;
};

TenantsReply complete(HttpClient& c, const std::string& key, const std::string& objective,
                      int maxTokens, std::vector<std::pair<std::string, std::string>> extra = {}) {
  HttpHeaders headers = std::move(extra);
  if (!key.empty()) headers.emplace_back("Authorization", "Bearer " + key);
  if (!objective.empty()) headers.emplace_back("x-gateway-inference-objective", objective);
  const std::string body =
      R"({"model": "fake-model", "prompt": "x", "max_tokens": )" + std::to_string(maxTokens) + "}";
  const auto start = Clock::now();
  auto res = c.post("/v1/completions", body, "application/json", headers);
  TenantsReply r;
  r.ms = msSince(start);
  if (!res) {
    r.error = res.error();
    return r;
  }
  r.status = res->status;
  r.body = res->body;
  r.wwwAuthenticate = res->header("www-authenticate");
  r.receivedHeaders = res->header("x-received-header-names");
  r.dropReason = res->header("x-llm-d-request-dropped-reason");
  return r;
}

int getStatus(const std::string& host, int port, const std::string& path,
              const HttpHeaders& headers = {}) {
  HttpClient c(host, port);
  auto r = c.get(path, headers);
  return r ? r->status : -1;
}

// Sends `bytes` on a new connection and returns what arrives within `wait` (until the server
// closes the connection or the wait ends).
std::string rawExchange(int port, const std::string& bytes, std::chrono::milliseconds wait) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size())) {
    const auto deadline = Clock::now() + wait;
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(1, left.count()))) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, std::size_t(n));
    }
  }
  ::close(fd);
  return got;
}

// "http://HOST:PORT" -> PORT.
int portOf(const std::string& url) {
  return std::stoi(url.substr(url.rfind(':') + 1));
}

class GatewayTenantsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-gateway-tenants-e2e");
    keys_ = dir_ + "/keys.yaml";
    writeKeys(keyFile(kBatchKey));
    server_ = startModelServer("model-server", dir_, 100000);
    ASSERT_TRUE(server_->startedOk()) << server_->error();
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }

  // Written whole, then renamed over the old file (as an operator's tooling would).
  void writeKeys(const std::string& text) {
    const std::string tmp = keys_ + ".tmp";
    std::ofstream(tmp) << text;
    ASSERT_EQ(std::rename(tmp.c_str(), keys_.c_str()), 0);
  }

  void startGateway(const std::string& config, bool admin) {
    const std::string file = dir_ + "/config.json";
    std::ofstream(file) << config;
    std::vector<std::string> argv{
        HOLDBACK_GATEWAY,       "--endpoint", server_->url(), "--listen", "127.0.0.1:0",
        "--scrape-interval-ms", "25",         "--api-keys",   keys_};
    if (!config.empty()) {
      argv.emplace_back("--config");
      argv.push_back(file);
    }
    if (admin) {
      argv.emplace_back("--admin-listen");
      argv.emplace_back("127.0.0.1:0");
    }
    gateway_ = std::make_unique<ChildProcess>("gateway", std::move(argv), dir_);
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->error();
    if (admin) {
      const auto& lines = gateway_->linesBeforeListening();
      const std::string prefix = "admin listening on ";
      ASSERT_EQ(lines.size(), 1u);
      ASSERT_EQ(lines[0].rfind(prefix, 0), 0u) << lines[0];
      admin_port_ = portOf(lines[0].substr(prefix.size()));
    }
    std::this_thread::sleep_for(150ms);  // a few scrapes
  }

  std::string adminMetrics() {
    HttpClient c("127.0.0.1", admin_port_);
    auto r = c.get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  }

  // Polls the admin /metrics until `name{labels}` reaches `value` (at most 3 s).
  bool waitMetric(const std::string& name, const std::string& labels, double value) {
    const auto deadline = Clock::now() + 3s;
    while (Clock::now() < deadline) {
      if (metricSum(adminMetrics(), name, labels) >= value) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::string dir_, keys_;
  int admin_port_ = 0;
  std::unique_ptr<ChildProcess> server_, gateway_;
};

TEST_F(GatewayTenantsE2ETest, KeysAdminListenerAndReload) {
  startGateway("", true);
  const std::string host = gateway_->host();
  const int port = gateway_->port();
  auto c = clientFor(*gateway_);

  // No key, a bad key, another scheme, two Authorization headers: 401, one reply each.
  const TenantsReply none = complete(c, "", "interactive", 2);
  EXPECT_EQ(none.status, 401) << none.error << none.body;
  EXPECT_EQ(none.wwwAuthenticate, "Bearer");
  EXPECT_TRUE(isOpenAiErrorBody(none.body)) << none.body;
  EXPECT_EQ(nlohmann::json::parse(none.body)["error"]["type"], "authentication_error");
  const TenantsReply bad = complete(c, "sk-nobody-0123456789abcdef", "interactive", 2);
  EXPECT_EQ(bad.status, 401) << bad.body;
  EXPECT_EQ(bad.wwwAuthenticate.rfind("Bearer", 0), 0u) << bad.wwwAuthenticate;
  EXPECT_TRUE(isOpenAiErrorBody(bad.body)) << bad.body;
  const TenantsReply basic = complete(c, "", "", 2, {{"Authorization", "Basic " + kChatKey}});
  EXPECT_EQ(basic.status, 401) << basic.body;
  const TenantsReply twice =
      complete(c, kChatKey, "", 2, {{"Authorization", "Bearer " + kChatKey}});
  EXPECT_EQ(twice.status, 401) << twice.body;
  EXPECT_EQ(getStatus(host, port, "/v1/models"), 401);

  // A tenant's key: served, and the model server did not see the Authorization header (it did
  // see the others: the hook works).
  const TenantsReply ok = complete(c, kChatKey, "interactive", 2);
  ASSERT_EQ(ok.status, 200) << ok.error << ok.body;
  EXPECT_EQ(ok.receivedHeaders.find("authorization"), std::string::npos) << ok.receivedHeaders;
  EXPECT_NE(ok.receivedHeaders.find("x-gateway-inference-objective"), std::string::npos)
      << ok.receivedHeaders;
  EXPECT_EQ(getStatus(host, port, "/v1/models", {{"Authorization", "Bearer " + kChatKey}}), 200);

  // The listeners: public = API + /healthz; admin = /metrics, /debug, /readyz, /healthz.
  const HttpHeaders with_key{{"Authorization", "Bearer " + kChatKey}};
  EXPECT_EQ(getStatus(host, port, "/metrics"), 404);
  EXPECT_EQ(getStatus(host, port, "/metrics", with_key), 404);
  EXPECT_EQ(getStatus(host, port, "/readyz", with_key), 404);
  EXPECT_EQ(getStatus(host, port, "/debug/program-aware-fairness", with_key), 404);
  EXPECT_EQ(getStatus(host, port, "/healthz"), 200);  // liveness needs no key
  EXPECT_EQ(getStatus("127.0.0.1", admin_port_, "/metrics"), 200);
  EXPECT_EQ(getStatus("127.0.0.1", admin_port_, "/readyz"), 200);
  EXPECT_EQ(getStatus("127.0.0.1", admin_port_, "/healthz"), 200);
  EXPECT_EQ(getStatus("127.0.0.1", admin_port_, "/debug/program-aware-fairness"), 200);
  EXPECT_EQ(getStatus("127.0.0.1", admin_port_, "/v1/models"), 404);
  {
    HttpClient a("127.0.0.1", admin_port_);
    auto r = a.post("/v1/completions", R"({"model": "fake-model", "prompt": "x"})",
                    "application/json", with_key);
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->status, 404);
  }
  const std::string m = adminMetrics();
  EXPECT_EQ(metricSum(m, "holdback_gateway_unauthorized_total", "reason=\"missing\""), 2.0) << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_unauthorized_total", "reason=\"invalid\""), 3.0) << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_tenant_requests_total", "tenant=\"chat-co\""), 2.0) << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_api_keys"), 2.0) << m;

  // A request without a key whose body is still to come is refused on its header: no 100
  // Continue, no wait for the 100000 bytes (the body timeout is 30 s), the connection closed.
  const auto refused_at = Clock::now();
  const std::string early =
      rawExchange(port,
                  "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100000\r\nExpect: 100-continue\r\n\r\n{\"model\": ",
                  3s);
  EXPECT_EQ(early.rfind("HTTP/1.1 401 ", 0), 0u) << early;
  EXPECT_NE(asciiLower(early).find("www-authenticate: bearer"), std::string::npos) << early;
  EXPECT_LT(msSince(refused_at), 2000.0) << "the connection was not closed after the 401";

  // The batch tenant's key works, then SIGHUP with its key rotated: the old key 401, the new one
  // served, its request counter kept.
  EXPECT_EQ(complete(c, kBatchKey, "batch", 2).status, 200);
  writeKeys(keyFile(kBatchKeyRotated));
  gateway_->signal(SIGHUP);
  ASSERT_TRUE(waitMetric("holdback_gateway_api_key_reloads_total", "result=\"ok\"", 1.0))
      << adminMetrics();
  EXPECT_EQ(complete(c, kBatchKey, "batch", 2).status, 401);
  EXPECT_EQ(complete(c, kBatchKeyRotated, "batch", 2).status, 200);
  EXPECT_EQ(complete(c, kChatKey, "interactive", 2).status, 200);
  EXPECT_EQ(
      metricSum(adminMetrics(), "holdback_gateway_tenant_requests_total", "tenant=\"batch-co\""),
      2.0);

  // A bad file on SIGHUP: reported, counted, and the keys in use stay.
  writeKeys("tenants:\n  - name: batch-co\n    maxObjective: batch\n    keys: [too-short]\n");
  gateway_->signal(SIGHUP);
  ASSERT_TRUE(waitMetric("holdback_gateway_api_key_reloads_total", "result=\"failed\"", 1.0))
      << adminMetrics();
  EXPECT_EQ(complete(c, kBatchKeyRotated, "batch", 2).status, 200);
  EXPECT_EQ(complete(c, kChatKey, "interactive", 2).status, 200);
  const std::string log = gateway_->stderrTail(4000);
  EXPECT_NE(log.find("/tenants/0/keys/0 (line 4, column 12): a key of 9 characters"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("kept the previous keys (2 tenants, 2 keys)"), std::string::npos) << log;
  EXPECT_EQ(log.find("too-short"), std::string::npos) << "a key's value in the log";

  const int status = gateway_->stop(5000ms);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(GatewayTenantsE2ETest, ClampedClaimsRevokeNothing) {
  startGateway(kEvictionConfig, false);  // one listener: /metrics there needs a key
  const HttpHeaders with_key{{"Authorization", "Bearer " + kChatKey}};
  EXPECT_EQ(getStatus(gateway_->host(), gateway_->port(), "/metrics"), 401);
  const auto metrics = [&] {
    HttpClient c(gateway_->host(), gateway_->port());
    auto r = c.get("/metrics", with_key);
    return r && r->status == 200 ? r->body : std::string();
  };
  const auto running = [&] {
    return metricValue(getMetrics(*server_), "vllm:num_requests_running").value_or(0);
  };
  const auto send = [&](const std::string& key, const std::string& objective, int tokens,
                        const std::string& flow = "") {
    return std::async(std::launch::async, [&, key, objective, tokens, flow] {
      auto c = clientFor(*gateway_);
      return complete(
          c, key, objective, tokens,
          flow.empty() ? HttpHeaders{} : HttpHeaders{{"x-gateway-inference-fairness-id", flow}});
    });
  };

  // The batch tenant fills the 4 slots with long requests (150 tokens: about 1.5 s).
  std::vector<std::future<TenantsReply>> batch;
  for (int i = 0; i < 4; ++i) batch.push_back(send(kBatchKey, "batch", 150));
  const auto fill_deadline = Clock::now() + 2s;
  while (Clock::now() < fill_deadline && running() < 4) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(running(), 4) << "the batch requests never filled the slots";

  // The same tenant claims interactive: clamped to batch, it waits behind the batch work and
  // revokes nothing (an interactive request would have revoked one within a dispatch cycle).
  const auto claimed_at = Clock::now();
  std::vector<std::future<TenantsReply>> claims;
  for (int i = 0; i < 2; ++i) {  // each with a fairness id of its own, which is ignored
    claims.push_back(send(kBatchKey, "interactive", 4, "rotating-" + std::to_string(i)));
  }
  std::this_thread::sleep_for(400ms);
  const std::string during = metrics();
  EXPECT_EQ(metricSum(during, "holdback_flow_control_revocations_issued_total"), 0.0) << during;
  // Queued in the batch band, in the tenant's flow.
  EXPECT_EQ(metricSum(during, "holdback_flow_control_queue_size",
                      "priority=\"-1\",fairness_id=\"batch-co\""),
            2.0)
      << during;
  EXPECT_EQ(metricSum(during, "holdback_flow_control_queue_size", "priority=\"10\""), 0.0)
      << during;
  EXPECT_EQ(metricSum(during, "holdback_flow_control_queue_size", "rotating-"), 0.0) << during;
  for (auto& f : claims) {
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout) << "a clamped claim was served at once";
  }

  // A real interactive tenant: it revokes a batch request and is served at once.
  std::future<TenantsReply> chat = send(kChatKey, "interactive", 4);
  const TenantsReply chat_reply = chat.get();
  EXPECT_EQ(chat_reply.status, 200) << chat_reply.error << chat_reply.body;
  std::vector<TenantsReply> claim_replies;
  for (auto& f : claims) claim_replies.push_back(f.get());
  int evicted = 0;
  for (auto& f : batch) {
    const TenantsReply r = f.get();
    if (r.status == 429 && r.dropReason == "evicted") {
      ++evicted;
    } else {
      EXPECT_EQ(r.status, 200) << r.error << r.body;
    }
  }
  const double claims_done_ms = msSince(claimed_at);
  for (const TenantsReply& r : claim_replies) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    // Served once a slot freed (after the interactive tenant's request), not at once.
    EXPECT_GT(r.ms, 400.0) << "clamped " << r.ms << " ms, chat " << chat_reply.ms;
  }
  const std::string m = metrics();
  std::printf(
      "[e2e-tenants] clamped claims served in %.0f / %.0f ms (all done %.0f ms after they were "
      "sent); interactive tenant %.0f ms; batch evicted %d; revocations issued %.0f\n",
      claim_replies[0].ms, claim_replies[1].ms, claims_done_ms, chat_reply.ms, evicted,
      metricSum(m, "holdback_flow_control_revocations_issued_total"));
  EXPECT_LT(chat_reply.ms, 1000.0);
  EXPECT_GE(evicted, 1);
  EXPECT_EQ(metricSum(m, "holdback_flow_control_revocations_issued_total"), double(evicted)) << m;
  EXPECT_EQ(metricSum(m, "holdback_flow_control_revocations_issued_total", "priority=\"-1\""),
            double(evicted))
      << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_tenant_priority_clamped_total", "tenant=\"batch-co\""),
            2.0)
      << m;
  EXPECT_EQ(metricSum(m, "holdback_gateway_tenant_priority_clamped_total", "tenant=\"chat-co\""),
            0.0)
      << m;
  // Dispatched at priority 10: the interactive tenant's one request only.
  EXPECT_EQ(metricSum(m, "holdback_flow_control_requests_total",
                      "outcome=\"Dispatched\",priority=\"10\""),
            1.0)
      << m;
}

}  // namespace
}  // namespace holdback_e2e
