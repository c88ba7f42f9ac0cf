// holdback-gateway in front of a model server that answers completions with broken HTTP: a bad
// status line, a body cut short, broken chunked framing, no response at all, a head without its
// end, an oversized head, random bytes, a slow but valid reply, or a valid one (its /metrics stay
// valid, so the gateway keeps dispatching to it). Every client request gets exactly one response:
// the server's own when it was a whole HTTP response, else a 502 with the JSON error body; the
// gateway stays up, and once the server behaves again every request succeeds (no connection or
// slot is left stuck by what went before).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

const std::string kCompletion =
    R"({"choices":[{"finish_reason":"length","index":0,"text":" ok"}],"model":"fake-model",)"
    R"("object":"text_completion","usage":{"completion_tokens":1,"prompt_tokens":1,"total_tokens":2}})";

std::string okResponse() {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(kCompletion.size()) + "\r\n\r\n" + kCompletion;
}

// A one-endpoint "model server" on a raw socket: valid /metrics always; completions answered by
// variant (round robin over kVariants while `hostile`, else valid).
class HostileServer {
 public:
  static constexpr int kVariants = 10;

  HostileServer() {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_, 128) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~HostileServer() {
    stopping_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (const int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  [[nodiscard]] int port() const { return port_; }
  void setHostile(bool h) { hostile_ = h; }
  // Close each connection right after a valid reply, without saying so (no Connection: close):
  // what a server does when its keep-alive timeout or request limit ends a pooled connection.
  void setCloseAfterReply(bool c) { closeAfterReply_ = c; }
  [[nodiscard]] int completionsSeen() const { return completions_; }
  // Answer completions with framing tricks instead (framedReply): interim responses before the
  // final one, or bytes past its end.
  void setFramingTricks(bool f) { framing_ = f; }
  // On every connection, read the second completion request and close without a reply (what a
  // server that crashed after taking the request looks like).
  void setDropSecondRequest(bool d) { dropSecond_ = d; }

  // The request number K of a body whose prompt is "req-K" (-1 without one).
  static int requestNumber(const std::string& body) {
    const std::size_t at = body.find("req-");
    return at == std::string::npos ? -1 : std::atoi(body.c_str() + at + 4);
  }
  // The reply to request K: a completion that names it.
  static std::string echoResponse(int k) {
    const std::string b = R"({"echo":"req-)" + std::to_string(k) + R"("})";
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(b.size()) + "\r\n\r\n" + b;
  }
  // The reply to request K by variant K % kFramingVariants.
  static constexpr int kFramingVariants = 6;
  static std::string framedReply(int k) {
    switch (k % kFramingVariants) {
      case 0:  // Early Hints, then the response
        return "HTTP/1.1 103 Early Hints\r\nLink: </hint.css>; rel=preload\r\n\r\n" +
               echoResponse(k);
      case 1:  // a second, unasked response right behind the first (the next client's "reply")
        return echoResponse(k) +
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n"
               "\r\n{\"stale\": \"yes\"}";
      case 2:  // 100 Continue nobody asked for
        return "HTTP/1.1 100 Continue\r\n\r\n" + echoResponse(k);
      case 3:  // three 102 Processing
        return "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
               "HTTP/1.1 102 Processing\r\n\r\n" +
               echoResponse(k);
      case 4: {  // interim responses without end
        std::string r;
        for (int i = 0; i < 40; ++i) r += "HTTP/1.1 102 Processing\r\n\r\n";
        return r + echoResponse(k);
      }
      default:
        return echoResponse(k);
    }
  }

 private:
  void acceptLoop() {
    while (!stopping_) {
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping_) return;
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  static bool sendAll(int fd, const std::string& s) {
    std::size_t sent = 0;
    while (sent < s.size()) {
      const ssize_t n = ::send(fd, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Reads one request (head, then Content-Length bytes of body) from `fd` into `head`; false
  // when the connection ends first.
  static bool readRequest(int fd, std::string& pending, std::string& head,
                          std::string* body = nullptr) {
    char buf[4096];
    for (;;) {
      const std::size_t end = pending.find("\r\n\r\n");
      if (end != std::string::npos) {
        head = pending.substr(0, end);
        std::size_t length = 0;
        const std::size_t cl = asciiLower(head).find("\r\ncontent-length:");
        if (cl != std::string::npos) length = std::strtoul(head.c_str() + cl + 17, nullptr, 10);
        while (pending.size() < end + 4 + length) {
          const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
          if (n <= 0) return false;
          pending.append(buf, static_cast<std::size_t>(n));
        }
        if (body != nullptr) *body = pending.substr(end + 4, length);
        pending.erase(0, end + 4 + length);
        return true;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      pending.append(buf, static_cast<std::size_t>(n));
    }
  }

  void serve(int fd) {
    std::string pending;
    std::string head;
    std::string body;
    int on_this_connection = 0;
    while (!stopping_ && readRequest(fd, pending, head, &body)) {
      if (head.rfind("GET /metrics", 0) == 0) {
        const std::string m =
            "vllm:num_requests_waiting{model_name=\"fake-model\"} 0\n"
            "vllm:num_requests_running{model_name=\"fake-model\"} 0\n"
            "vllm:kv_cache_usage_perc{model_name=\"fake-model\"} 0\n";
        if (!sendAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                             std::to_string(m.size()) + "\r\n\r\n" + m)) {
          break;
        }
        continue;
      }
      if (head.rfind("GET /v1/models", 0) == 0) {  // the gateway's model list
        const std::string m = R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
        if (!sendAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(m.size()) + "\r\n\r\n" + m)) {
          break;
        }
        continue;
      }
      if (dropSecond_ && head.rfind("POST", 0) == 0 && ++on_this_connection == 2) {
        ++completions_;
        break;
      }
      if (framing_) {
        ++completions_;
        if (!sendAll(fd, framedReply(requestNumber(body)))) break;
        continue;
      }
      const int variant = completions_++ % kVariants;
      if (!hostile_ || variant == 0) {
        if (!sendAll(fd, okResponse()) || closeAfterReply_) break;
        continue;
      }
      bool keep = false;
      switch (variant) {
        case 1:
          (void)sendAll(fd, "HTTP/1.1 abc\r\n\r\n");
          break;
        case 2:  // a body cut short
          (void)sendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choices\":");
          break;
        case 3:  // broken chunked framing
          (void)sendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n");
          break;
        case 4:
          break;  // no response at all
        case 5:
          (void)sendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
          break;
        case 6:  // an oversized head
          (void)sendAll(fd, "HTTP/1.1 200 OK\r\nX-Big: " + std::string(200000, 'x') +
                                "\r\nContent-Length: 2\r\n\r\n{}");
          break;
        case 7:  // random bytes
        {
          static constexpr char kJunk[] = "\x16\x03\x01\x00\xff garbage \0\r\n\r\n";
          (void)sendAll(fd, std::string(kJunk, sizeof kJunk - 1));
        } break;
        case 8:  // slow but valid
          std::this_thread::sleep_for(300ms);
          keep = sendAll(fd, okResponse());
          break;
        default:  // an upstream error with a body that is not JSON: passed through
          keep = sendAll(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops");
          break;
      }
      if (!keep) break;
    }
    ::shutdown(fd, SHUT_RDWR);
    std::lock_guard lock(mu_);
    for (int& f : fds_) {
      if (f == fd) f = -1;
    }
    ::close(fd);
  }

  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> hostile_{true};
  std::atomic<bool> closeAfterReply_{false};
  std::atomic<bool> framing_{false};
  std::atomic<bool> dropSecond_{false};
  std::atomic<int> completions_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

// The gateway in front of `server` (scrapes every 25 ms, upstream timeout 5 s), after its
// first scrape.
std::unique_ptr<ChildProcess> startGateway(const HostileServer& server, const std::string& name) {
  auto gateway = std::make_unique<ChildProcess>(
      "gateway",
      std::vector<std::string>{
          HOLDBACK_GATEWAY, "--endpoint", "http://127.0.0.1:" + std::to_string(server.port()),
          "--listen", "127.0.0.1:0", "--scrape-interval-ms", "25", "--upstream-timeout-s", "5"},
      makeScratchDir(name));
  if (gateway->startedOk()) std::this_thread::sleep_for(200ms);  // a first scrape
  return gateway;
}

TEST(GatewayHostileUpstreamE2ETest, EveryClientGetsOneReplyAndNothingStaysStuck) {
  HostileServer server;
  ASSERT_GT(server.port(), 0);
  const auto started = startGateway(server, "holdback-gateway-hostile-upstream");
  ASSERT_TRUE(started->startedOk()) << started->error();
  ChildProcess& gateway = *started;

  const std::string body = R"({"model":"fake-model","prompt":"hi","max_tokens":1})";
  int ok = 0;
  int badGateway = 0;
  int passedThrough = 0;
  for (int i = 0; i < 60; ++i) {
    auto client = clientFor(gateway, 15s);  // a fresh client connection each time
    auto r = client.post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r) << "request " << i << ": no response (" << r.error() << ")";
    if (r->status == 200) {
      ++ok;
      EXPECT_EQ(r->body, kCompletion) << "request " << i;
    } else if (r->status == 502) {
      ++badGateway;
      EXPECT_TRUE(isOpenAiErrorBody(r->body)) << "request " << i << ": " << r->body;
    } else if (r->status == 500) {
      ++passedThrough;
      EXPECT_EQ(r->body, "oops") << "request " << i;
    } else {
      ADD_FAILURE() << "request " << i << ": status " << r->status << " " << r->body;
    }
  }
  std::cout << "hostile phase: " << ok << " x 200, " << badGateway << " x 502, " << passedThrough
            << " x 500 passed through; " << server.completionsSeen()
            << " completions reached the server\n";
  EXPECT_GT(ok, 0);
  EXPECT_GT(badGateway, 0);
  EXPECT_GT(passedThrough, 0);

  // The server behaves again: every request succeeds, promptly and concurrently.
  server.setHostile(false);
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      auto c = clientFor(gateway, 10s);
      for (int i = 0; i < 10; ++i) {
        auto r = c.post("/v1/completions", body, "application/json");
        if (r && r->status == 200 && r->body == kCompletion) ++good;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 80);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_FALSE(gateway.waitExit(10ms).has_value()) << "the gateway exited";
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

// A server that closes every kept-alive connection right after its reply, without saying so: the
// gateway pools each (the reply did not say close), usually finds it closed when it would reuse it
// (the check every reuse makes) and opens a new one. A request sent in the instant between that
// check and the server's close cannot be told from one the server read before closing, so it gets
// a 502 rather than a second trip (servers close idle connections after seconds, and the gateway
// drops idle ones after --upstream-idle-ms, 1.5 s, first). Every request gets exactly one reply,
// none reaches the server twice, and most succeed.
TEST(GatewayHostileUpstreamE2ETest, AConnectionTheServerClosedAfterItsReplyIsNotReused) {
  HostileServer server;
  ASSERT_GT(server.port(), 0);
  server.setHostile(false);
  server.setCloseAfterReply(true);
  const auto started = startGateway(server, "holdback-gateway-closing-upstream");
  ASSERT_TRUE(started->startedOk()) << started->error();
  ChildProcess& gateway = *started;

  const std::string body = R"({"model":"fake-model","prompt":"hi","max_tokens":1})";
  constexpr int kClients = 4;
  constexpr int kEach = 15;
  std::atomic<int> good{0}, raced{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&] {
      auto c = clientFor(gateway, 10s);
      for (int i = 0; i < kEach; ++i) {
        auto r = c.post("/v1/completions", body, "application/json");
        if (r && r->status == 200 && r->body == kCompletion) {
          ++good;
        } else if (r && r->status == 502 && isOpenAiErrorBody(r->body)) {
          ++raced;
        } else {
          std::lock_guard lock(mu);
          failures.push_back(r ? std::to_string(r->status) + " " + r->body
                               : "no response: " + r.error());
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(good.load() + raced.load(), kClients * kEach);
  EXPECT_GT(good.load(), 0);
  // Each success reached the server once, and no request reached it twice.
  EXPECT_GE(server.completionsSeen(), good.load());
  EXPECT_LE(server.completionsSeen(), kClients * kEach);
  const std::string metrics = getMetrics(gateway);
  const double reuses = metricValue(metrics, "holdback_gateway_upstream_reuses_total").value_or(0);
  std::cout << "closing server: " << good.load() << " x 200, " << raced.load()
            << " x 502 (raced the close); pooled connections reused " << reuses << ", connects "
            << metricValue(metrics, "holdback_gateway_upstream_connects_total").value_or(-1)
            << "\n";
  EXPECT_FALSE(gateway.waitExit(10ms).has_value()) << "the gateway exited";
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

// A server whose responses carry interim (1xx) responses before them or bytes past their end
// (a second, unasked response). A pooled connection that went back to the pool with such bytes
// unread would hand them to the next request as its reply: the gateway reuses a connection only
// after a complete response with nothing left over, reads 100 and passes 102/103 on (RFC 9110
// section 15.2), and fails an exchange that never ends its interim responses with a 502. Every
// client gets exactly its own reply.
TEST(GatewayHostileUpstreamE2ETest, AResponseIsNeverTakenForAnotherRequests) {
  HostileServer server;
  ASSERT_GT(server.port(), 0);
  server.setFramingTricks(true);
  const auto started = startGateway(server, "holdback-gateway-framing-upstream");
  ASSERT_TRUE(started->startedOk()) << started->error();
  ChildProcess& gateway = *started;

  constexpr int kClients = 2;
  constexpr int kEach = 24;
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> good{0}, bad_gateway{0}, hints{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto c = clientFor(gateway, 10s);
      for (int i = 0; i < kEach; ++i) {
        const int k = t * kEach + i;
        const std::string body =
            R"({"model":"fake-model","prompt":"req-)" + std::to_string(k) + R"(","max_tokens":1})";
        auto r = c.post("/v1/completions", body, "application/json");
        std::string problem;
        if (!r) {
          problem = "no response: " + r.error();
        } else if (k % HostileServer::kFramingVariants == 4) {
          if (r->status == 502 && isOpenAiErrorBody(r->body)) {
            ++bad_gateway;
          } else {
            problem = "endless interim responses: " + std::to_string(r->status) + " " + r->body;
          }
        } else if (r->status != 200 ||
                   r->body.find("\"req-" + std::to_string(k) + "\"") == std::string::npos) {
          problem = "status " + std::to_string(r->status) + " body " + r->body;
        } else {
          ++good;
          if (k % HostileServer::kFramingVariants == 0) {
            if (r->interim == std::vector<int>{103}) {
              ++hints;
            } else {
              problem = "Early Hints not passed on";
            }
          } else if (!r->interim.empty() && k % HostileServer::kFramingVariants != 3) {
            problem = "unexpected interim responses";
          }
        }
        if (!problem.empty()) {
          std::lock_guard lock(mu);
          failures.push_back("request " + std::to_string(k) + ": " + problem);
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  constexpr int kEndless = kClients * kEach / HostileServer::kFramingVariants;
  EXPECT_EQ(good.load(), kClients * kEach - kEndless);
  EXPECT_EQ(bad_gateway.load(), kEndless);
  EXPECT_EQ(hints.load(), kClients * kEach / HostileServer::kFramingVariants);
  const std::string metrics = getMetrics(gateway);
  EXPECT_GE(metricValue(metrics, "holdback_gateway_upstream_desynced_total").value_or(0), 1.0);
  EXPECT_FALSE(gateway.waitExit(10ms).has_value()) << "the gateway exited";
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

// A server that takes a request on a kept-alive connection and closes it without a reply: the
// request may have run, so the gateway answers 502 instead of sending it again on a new
// connection. Each request reaches the server exactly once, and gets exactly one reply.
TEST(GatewayHostileUpstreamE2ETest, ARequestTheServerMayHaveReadIsNeverSentTwice) {
  HostileServer server;
  ASSERT_GT(server.port(), 0);
  server.setHostile(false);
  server.setDropSecondRequest(true);
  const auto started = startGateway(server, "holdback-gateway-dropping-upstream");
  ASSERT_TRUE(started->startedOk()) << started->error();
  ChildProcess& gateway = *started;
  const std::string body = R"({"model":"fake-model","prompt":"hi","max_tokens":1})";
  constexpr int kRequests = 12;
  int ok = 0, bad_gateway = 0;
  auto c = clientFor(gateway, 10s);
  for (int i = 0; i < kRequests; ++i) {
    auto r = c.post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r) << "request " << i << ": " << r.error();
    if (r->status == 200) {
      ++ok;
    } else {
      EXPECT_EQ(r->status, 502) << r->body;
      ++bad_gateway;
    }
  }
  EXPECT_EQ(server.completionsSeen(), kRequests) << "a request was sent twice";
  EXPECT_EQ(ok + bad_gateway, kRequests);
  EXPECT_GT(bad_gateway, 0) << "the case this test is about did not happen";
  EXPECT_FALSE(gateway.waitExit(10ms).has_value()) << "the gateway exited";
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

}  // namespace
}  // namespace holdback_e2e
