// holdback-proxy-floor (bench/proxy_floor.cpp), the floor the gateway's load figures are compared
// with, as a real process: it relays kept-alive requests and streams unchanged, under concurrent
// connections, and a client whose upstream cannot be reached gets its connection closed, not a
// hang.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "http_client.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kFloorBody = R"({"model": "fake-model", "prompt": "hi", "max_tokens": 4})";

class ProxyFloorE2ETest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-proxy-floor-test"); }

  ChildProcess& startFloor(const std::string& upstream) {
    floor_ = std::make_unique<ChildProcess>(
        "proxy-floor", std::vector<std::string>{HOLDBACK_PROXY_FLOOR, "--upstream", upstream},
        dir_);
    EXPECT_TRUE(floor_->startedOk()) << floor_->error();
    return *floor_;
  }

  HttpClient client() {
    return HttpClient(floor_->host(), floor_->port(), {.connectTimeout = 2s, .readTimeout = 5s});
  }

  void TearDown() override {
    if (HasFailure() && floor_) std::cerr << floor_->stderrTail() << "\n";
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_;
  std::unique_ptr<ChildProcess> floor_;
};

TEST_F(ProxyFloorE2ETest, RelaysKeptAliveRequestsAndStreamsUnchanged) {
  server_ = std::make_unique<ChildProcess>(
      "model-server",
      std::vector<std::string>{HOLDBACK_MODEL_SERVER, "--port", "0", "--slots", "64", "--token-ms",
                               "1", "--prefill-ms", "0", "--model", "fake-model"},
      dir_);
  ASSERT_TRUE(server_->startedOk()) << server_->error();
  startFloor(server_->host() + ":" + std::to_string(server_->port()));
  ASSERT_TRUE(floor_->startedOk());

  // Several requests over one kept-alive connection: each reply whole and parseable.
  auto c = client();
  for (int i = 0; i < 5; ++i) {
    auto r = c.post("/v1/completions", kFloorBody, "application/json");
    ASSERT_TRUE(r) << "request " << i << ": " << r.error();
    ASSERT_EQ(r->status, 200);
    const auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j.at("usage").at("completion_tokens"), 4);
  }
  // A stream relayed event by event to its end.
  auto s = c.post("/v1/completions",
                  R"({"model": "fake-model", "prompt": "hi", "max_tokens": 6, "stream": true})",
                  "application/json");
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  const SseSummary sse = summarizeSse(s->body);
  EXPECT_EQ(sse.events, 6);
  EXPECT_TRUE(sse.done);

  // Concurrent connections, each kept alive: every request gets its own reply.
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      auto cc = client();
      for (int i = 0; i < 10; ++i) {
        auto r = cc.post("/v1/completions", kFloorBody, "application/json");
        if (r && r->status == 200 && r->body.find("\"completion_tokens\":4") != std::string::npos)
          ok.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 160);
}

TEST_F(ProxyFloorE2ETest, ClosesTheClientConnectionWhenTheUpstreamIsUnreachable) {
  // A port nothing listens on: bind one (no listen), read its number, close it.
  std::string upstream;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    ASSERT_TRUE(bound);
    upstream = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  startFloor(upstream);
  ASSERT_TRUE(floor_->startedOk());
  auto c = client();
  const auto start = std::chrono::steady_clock::now();
  auto r = c.post("/v1/completions", kFloorBody, "application/json");
  EXPECT_FALSE(r) << "status " << (r ? r->status : 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "closed, not left to time out";
  // The relay itself stays up for the next client.
  auto again = client().post("/v1/completions", kFloorBody, "application/json");
  EXPECT_FALSE(again);
  EXPECT_FALSE(floor_->waitExit(10ms).has_value()) << "the relay exited";
}

}  // namespace
}  // namespace holdback_e2e
