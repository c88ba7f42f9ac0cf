// holdback-gateway against clients that mean harm, each attack on its own connection: a body
// nested deeper than any parser's stack (with the engine-priority rewrite on, which re-serializes
// bodies), fairness ids that are not UTF-8, too long or hold control characters (they would
// reach /metrics labels and /debug), and chunked bodies whose chunk extensions or trailers never
// end (Beast bounds neither; the gateway's read buffer does). Each attack gets its 4xx with an
// OpenAI-style error body, the gateway's memory stays bounded, /metrics stays valid for promtool,
// and the gateway serves the next well-behaved request.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

const std::string kBody = R"({"model":"fake-model","prompt":"hi","max_tokens":2})";

// The gateway's resident memory in KiB (VmRSS), or -1.
long residentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// A raw client connection: bytes out, whatever comes back.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  [[nodiscard]] bool ok() const { return fd_ >= 0; }

  // Sends `bytes`; false once the peer stopped taking them (reset or closed).
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Whether a reply has started to arrive (without waiting).
  bool replyWaiting() {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  // What arrives until the peer closes or `timeout` passes.
  std::string readAll(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, static_cast<short>(0)};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

// The status code of the first response in `raw` (0 when there is none).
int statusOf(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return 0;
  return std::atoi(raw.c_str() + 9);
}

// The body of the first response in `raw` (everything after its head).
std::string bodyOf(const std::string& raw) {
  const std::size_t end = raw.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : raw.substr(end + 4);
}

class GatewayHostileClientsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-gateway-hostile-clients");
    server_ = startModelServer("server", dir_, 16384);
    ASSERT_TRUE(server_->startedOk()) << server_->stderrTail();
    // The built-in configuration with the engine-priority rewrite on: the path that re-serializes
    // every dispatched body.
    gateway_ = startGatewayWith("gateway", dir_,
                                R"({"apiVersion": "llm-d.ai/v1alpha1",
                                    "kind": "EndpointPickerConfig",
                                    "featureGates": ["flowControl"],
                                    "flowControl": {"enginePriority": "vllm"}})",
                                {server_.get()});
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->stderrTail();
    std::this_thread::sleep_for(200ms);  // a few scrapes
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }
  // A well-behaved request still gets its completion, and the gateway is still running.
  void expectStillServing() {
    EXPECT_FALSE(gateway_->waitExit(10ms).has_value()) << "the gateway exited";
    auto c = clientFor(*gateway_, 10s);
    auto r = c.post("/v1/completions", kBody, "application/json",
                    {{"x-gateway-inference-objective", "interactive"}});
    ASSERT_TRUE(r) << r.error();
    EXPECT_EQ(r->status, 200) << r->body;
  }
  // /metrics passes `promtool check metrics` (skipped without promtool).
  void expectPromtoolClean() {
    if (const auto r = promtoolCheck(getMetrics(*gateway_), dir_)) {
      EXPECT_EQ(r->status, 0) << r->report;
    }
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_, gateway_;
};

// 200,000 nested arrays (400 KB, under the 4 MiB body limit) once overflowed the I/O thread's
// stack in the engine-priority rewrite and killed the process with every request in flight.
TEST_F(GatewayHostileClientsE2ETest, ADeeplyNestedBodyIsRefusedWith400) {
  for (const std::size_t depth : {std::size_t{200000}, std::size_t{129}}) {
    const std::string body = R"({"model":"fake-model","prompt":"hi","max_tokens":2,"x":)" +
                             std::string(depth, '[') + std::string(depth, ']') + "}";
    auto c = clientFor(*gateway_, 10s);
    auto r = c.post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r) << "depth " << depth << ": " << r.error();
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_TRUE(isOpenAiErrorBody(r->body)) << r->body;
    EXPECT_NE(r->body.find("128 levels"), std::string::npos) << r->body;
  }
  // A body at the limit (the object and 127 arrays) is served, with the rewrite.
  const std::string at_limit = R"({"model":"fake-model","prompt":"hi","max_tokens":2,"x":)" +
                               std::string(127, '[') + std::string(127, ']') + "}";
  auto c = clientFor(*gateway_, 10s);
  auto r = c.post("/v1/completions", at_limit, "application/json");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200) << r->body;
  expectStillServing();
}

// A fairness id becomes a flow, a /metrics label value and a /debug entry: one that is not
// UTF-8 made promtool reject the whole /metrics text while its request was queued.
TEST_F(GatewayHostileClientsE2ETest, FairnessIdsThatAreNotShortUtf8TextAreRefusedWith400) {
  const std::vector<std::string> bad{std::string("\xff\xfe\x80", 3) + "bad",
                                     std::string("ok\xc0\xaf", 4), std::string(257, 'f')};
  for (const std::string& id : bad) {
    for (const char* header :
         {"x-gateway-inference-fairness-id", "x-llm-d-inference-fairness-id"}) {
      auto c = clientFor(*gateway_, 10s);
      auto r = c.post("/v1/completions", kBody, "application/json", {{header, id}});
      ASSERT_TRUE(r) << r.error();
      EXPECT_EQ(r->status, 400) << header << ": " << r->body;
      EXPECT_TRUE(isOpenAiErrorBody(r->body)) << r->body;
    }
  }
  // UTF-8 at the length limit, with characters the exposition format escapes, is a flow.
  const std::string fine = "tenant \"a\\b\" \xc2\xb5" + std::string(256 - 15, 'x');
  ASSERT_EQ(fine.size(), 256u);
  auto c = clientFor(*gateway_, 10s);
  auto r = c.post("/v1/completions", kBody, "application/json",
                  {{"x-gateway-inference-fairness-id", fine}});
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200) << r->body;
  expectPromtoolClean();
  expectStillServing();
}

// A chunked body whose chunk header (its extensions) or whose trailers never end: Beast reads
// both into the connection's buffer without a limit of its own, so one connection could grow the
// gateway's memory for the whole body timeout. The gateway refuses each with 400 once its read
// buffer (--max-header-bytes + 64 KiB) is full.
TEST_F(GatewayHostileClientsE2ETest, EndlessChunkExtensionsAndTrailersAreRefusedWith400) {
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  const long rss_before = residentKiB(gateway_->pid());
  struct Attack {
    const char* name;
    std::string start;
    std::string repeat;
  };
  const std::vector<Attack> attacks{
      {"chunk extension", "5;", "ext=value;"},
      {"trailers", std::to_string(kBody.size()) + "\r\n" + kBody + "\r\n0\r\n", "X-Pad: abc\r\n"},
  };
  for (const Attack& a : attacks) {
    RawConnection conn(gateway_->port());
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(conn.send(head + a.start));
    // Up to 8 MiB, 64 KiB at a time, until the gateway answers or stops reading (it answers after
    // about 80 KiB; the kernel's socket buffers take some more before the reply is seen).
    std::string piece;
    while (piece.size() < 64 * 1024) piece += a.repeat;
    std::size_t sent = 0;
    bool answered = false;
    while (sent < 8u * 1024 * 1024) {
      if (conn.replyWaiting()) {
        answered = true;
        break;
      }
      if (!conn.send(piece)) break;
      sent += piece.size();
      std::this_thread::sleep_for(2ms);  // time for the gateway to read and answer
    }
    const std::string reply = conn.readAll(5s);
    EXPECT_TRUE(answered || !reply.empty()) << a.name << ": no reply after " << sent << " bytes";
    EXPECT_LT(sent, 4u * 1024 * 1024) << a.name << ": the gateway kept reading";
    EXPECT_EQ(statusOf(reply), 400) << a.name << ": " << reply.substr(0, 300);
    EXPECT_TRUE(isOpenAiErrorBody(bodyOf(reply))) << a.name << ": " << reply.substr(0, 300);
  }
  const long rss_after = residentKiB(gateway_->pid());
  if (rss_before > 0 && rss_after > 0) {
    EXPECT_LT(rss_after - rss_before, 4 * 1024)
        << "KiB grown: " << rss_before << " -> " << rss_after;
  }
  expectStillServing();
}

// Overload protection: a global budget for buffered bodies (--max-buffered-bytes), a cap on one
// non-streamed response (--max-response-bytes) and on connections per client address.
class GatewayOverloadE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-gateway-overload");
    server_ = startModelServer("server", dir_, 16384);
    ASSERT_TRUE(server_->startedOk()) << server_->stderrTail();
    gateway_ = std::make_unique<ChildProcess>(
        "gateway",
        std::vector<std::string>{
            HOLDBACK_GATEWAY, "--endpoint", server_->url(), "--listen", "127.0.0.1:0",
            "--scrape-interval-ms", "25", "--max-buffered-bytes", "1000000", "--max-body-bytes",
            "900000", "--max-response-bytes", "400", "--max-connections-per-client", "6"},
        dir_);
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->stderrTail();
    std::this_thread::sleep_for(200ms);
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }
  std::string dir_;
  std::unique_ptr<ChildProcess> server_, gateway_;
};

// A body that would take the buffered bytes past the budget is refused at once with 503 and
// Retry-After, without being read; the request holding the budget is served whole; once it is
// done the refused one goes through.
TEST_F(GatewayOverloadE2ETest, ABodyOverTheBudgetGets503AndNothingAdmittedIsLost) {
  // 700 kB of body outside the prompt (the declared footprint stays small).
  const std::string big = R"({"model":"fake-model","prompt":"hi","max_tokens":2,"pad":")" +
                          std::string(700000, 'p') + R"("})";
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(big.size()) + "\r\n\r\n";
  RawConnection holder(gateway_->port());
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(holder.send(head + big.substr(0, 1000)));  // admitted; most of its body to come
  std::this_thread::sleep_for(100ms);
  EXPECT_GE(metricValue(getMetrics(*gateway_), "holdback_gateway_buffered_bytes").value_or(0),
            double(big.size()));

  RawConnection refused(gateway_->port());
  ASSERT_TRUE(refused.ok());
  ASSERT_TRUE(refused.send(head));
  const std::string reply = refused.readAll(3s);
  EXPECT_EQ(statusOf(reply), 503) << reply.substr(0, 300);
  EXPECT_NE(reply.find("Retry-After: 1"), std::string::npos) << reply.substr(0, 300);
  EXPECT_TRUE(isOpenAiErrorBody(bodyOf(reply))) << reply.substr(0, 300);

  ASSERT_TRUE(holder.send(big.substr(1000)));
  const std::string served = holder.readAll(5s);
  EXPECT_EQ(statusOf(served), 200) << served.substr(0, 300);

  auto c = clientFor(*gateway_, 10s);
  auto r = c.post("/v1/completions", big, "application/json");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200) << r->body;
  // The budget is released when the gateway's write of the reply completes, which can be a
  // moment after the client has read it: the gauge is polled (2 s at most) rather than read once.
  std::string metrics = getMetrics(*gateway_);
  for (int i = 0; i < 40 && metricValue(metrics, "holdback_gateway_buffered_bytes") != 0.0; ++i) {
    std::this_thread::sleep_for(50ms);
    metrics = getMetrics(*gateway_);
  }
  EXPECT_EQ(metricValue(metrics, "holdback_gateway_overload_shed_total").value_or(0), 1.0);
  EXPECT_EQ(metricValue(metrics, "holdback_gateway_buffered_bytes").value_or(-1), 0.0);
}

// A non-streamed response larger than --max-response-bytes is a 502 (not collected without
// end); a streamed one is relayed as it comes, whatever its size.
TEST_F(GatewayOverloadE2ETest, AResponseOverItsCapIs502AndStreamsAreNotCapped) {
  auto c = clientFor(*gateway_, 10s);
  auto r = c.post("/v1/completions", R"({"model":"fake-model","prompt":"hi","max_tokens":100})",
                  "application/json");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_NE(r->body.find("--max-response-bytes"), std::string::npos) << r->body;
  auto s = c.post("/v1/completions",
                  R"({"model":"fake-model","prompt":"hi","max_tokens":100,"stream":true})",
                  "application/json");
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->status, 200);
  EXPECT_GT(s->body.size(), 400u);
  EXPECT_EQ(
      metricValue(getMetrics(*gateway_), "holdback_gateway_responses_too_large_total").value_or(0),
      1.0);
}

// Connections from one address beyond --max-connections-per-client get 503 and are closed; the
// ones open keep working, and a closed one makes room.
TEST_F(GatewayOverloadE2ETest, ConnectionsPerClientAddressAreCapped) {
  std::vector<std::unique_ptr<HttpClient>> open;
  for (int i = 0; i < 6; ++i) {
    open.push_back(std::make_unique<HttpClient>(clientFor(*gateway_, 5s)));
    auto r = open.back()->get("/healthz");
    ASSERT_TRUE(r) << i << ": " << r.error();
    ASSERT_EQ(r->status, 200) << i;
  }
  auto extra = clientFor(*gateway_, 5s);
  auto shed = extra.get("/healthz");
  ASSERT_TRUE(shed) << shed.error();
  EXPECT_EQ(shed->status, 503);
  EXPECT_TRUE(shed->hasHeader("Retry-After"));
  auto again = open.front()->get("/healthz");
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->status, 200);
  open.pop_back();  // closes one
  std::this_thread::sleep_for(100ms);
  {
    auto room = clientFor(*gateway_, 5s);
    auto ok = room.get("/healthz");
    ASSERT_TRUE(ok) << ok.error();
    EXPECT_EQ(ok->status, 200);
  }
  open.clear();
  std::this_thread::sleep_for(100ms);
  EXPECT_GE(
      metricValue(getMetrics(*gateway_), "holdback_gateway_client_address_shed_total").value_or(0),
      1.0);
}

}  // namespace
}  // namespace holdback_e2e
