// holdback-gateway under malformed and hostile HTTP, over raw sockets: a few hundred seeded
// mutations of a valid completion request (bytes flipped, inserted and dropped in the head;
// wrong, duplicate and missing Content-Length; bad chunked framing; bad methods, paths and
// versions; bodies that are not JSON; oversized headers). For every connection, what comes back
// is zero or more complete, well-framed HTTP/1.1 responses, never more than the requests the
// bytes could hold, every error response (4xx / 5xx) carries an OpenAI-style JSON error body,
// and a request known to be complete gets exactly one final response. Afterwards the gateway is
// still up and serves a valid request.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

// One test case: the bytes to send, and whether they hold exactly one complete request (then
// exactly one final response is due).
struct Case {
  std::string bytes;
  bool complete = false;
  std::string kind;
};

std::string request(std::string_view method, std::string_view target, std::string_view version,
                    const std::vector<std::string>& headers, std::string_view body) {
  std::string r = std::string(method) + " " + std::string(target) + " " + std::string(version) +
                  "\r\nHost: gateway\r\n";
  for (const std::string& h : headers) r += h + "\r\n";
  r += "\r\n";
  r += body;
  return r;
}

const std::string kHostileInputBody = R"({"model":"fake-model","prompt":"hi","max_tokens":2})";

std::string contentLength(std::size_t n) {
  return "Content-Length: " + std::to_string(n);
}

Case makeCase(std::mt19937& rng) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::string json = "Content-Type: application/json";
  switch (pick(10)) {
    case 0:  // the control: valid
      return {request("POST", "/v1/completions", "HTTP/1.1",
                      {json, contentLength(kHostileInputBody.size())}, kHostileInputBody),
              true, "valid"};
    case 1: {  // bytes flipped, inserted or dropped in the head
      std::string r = request("POST", "/v1/completions", "HTTP/1.1",
                              {json, contentLength(kHostileInputBody.size())}, kHostileInputBody);
      const std::size_t head = r.find("\r\n\r\n");
      const int edits = 1 + pick(4);
      static constexpr char kBytes[] = {'\r', '\n', ' ', ':', '\0', '\x7f', '\xff', '\t', 'A', '"'};
      for (int i = 0; i < edits; ++i) {
        const std::size_t at = rng() % head;
        const char c = kBytes[pick(sizeof kBytes)];
        switch (pick(3)) {
          case 0:
            r[at] = c;
            break;
          case 1:
            r.insert(r.begin() + static_cast<std::ptrdiff_t>(at), c);
            break;
          default:
            r.erase(at, 1);
            break;
        }
      }
      return {r, false, "head-mutated"};
    }
    case 2: {  // Content-Length wrong: smaller (leftover bytes), larger (waits), or garbage
      static const char* kLengths[] = {
          "0", "5", "99999", "-1", "1e3", "0x10", "", "18446744073709551616", "  12  ", "12, 12"};
      return {
          request("POST", "/v1/completions", "HTTP/1.1",
                  {json, std::string("Content-Length: ") + kLengths[pick(10)]}, kHostileInputBody),
          false, "content-length"};
    }
    case 3:  // two Content-Lengths that disagree: a request smuggling shape, refused
      return {request("POST", "/v1/completions", "HTTP/1.1",
                      {json, contentLength(kHostileInputBody.size()),
                       contentLength(kHostileInputBody.size() + 3)},
                      kHostileInputBody),
              false, "duplicate-content-length"};
    case 4: {  // chunked framing, valid or not
      static const char* kChunks[] = {"",
                                      "zz\r\n",
                                      "-5\r\n",
                                      "ffffffffffffffffff\r\n",
                                      "5;x=y\r\n",
                                      "0\r\n\r\n",
                                      "3\r\nabc\r\n0\r\n\r\n"};
      std::string body;
      const bool valid = pick(2) == 0;
      if (valid) {
        char size[16];
        std::snprintf(size, sizeof size, "%zx", kHostileInputBody.size());
        body = std::string(size) + "\r\n" + kHostileInputBody + "\r\n0\r\n\r\n";
      } else {
        body = kChunks[pick(7)];
      }
      return {request("POST", "/v1/completions", "HTTP/1.1", {json, "Transfer-Encoding: chunked"},
                      body),
              valid, valid ? "chunked" : "chunked-bad"};
    }
    case 5: {  // methods, targets and versions
      static const char* kMethods[] = {"GET", "PUT", "DELETE", "post", "BREW", "OPTIONS"};
      static const char* kTargets[] = {
          "/v1/completions", "/nope",         "*", "/v1/completions?x=1", "http://h/v1/completions",
          "/%ff%00",         "/../etc/passwd"};
      static const char* kVersions[] = {"HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "HTTP/1", "http/1.1"};
      const char* version = kVersions[pick(5)];
      const bool known =
          std::string_view(version) == "HTTP/1.1" || std::string_view(version) == "HTTP/1.0";
      return {request(kMethods[pick(6)], kTargets[pick(7)], version,
                      {json, contentLength(kHostileInputBody.size())}, kHostileInputBody),
              known, "method-target-version"};
    }
    case 6: {  // a body that is not one JSON object, with the right length
      static const char* kBodies[] = {
          "", "[]", "null", "{", "{\"stream\": tru}", "\xff\xfe", "{\"a\":1} {}", "42", "\"s\""};
      const std::string b = kBodies[pick(9)];
      return {
          request("POST", "/v1/chat/completions", "HTTP/1.1", {json, contentLength(b.size())}, b),
          true, "bad-json"};
    }
    case 7: {  // an oversized header (over --max-header-bytes 4096)
      return {request("POST", "/v1/completions", "HTTP/1.1",
                      {json, contentLength(kHostileInputBody.size()),
                       "X-Big: " + std::string(6000 + pick(20000), 'b')},
                      kHostileInputBody),
              true, "big-header"};
    }
    case 8: {  // odd but legal or refused header shapes
      const std::string kHeaders[] = {"NoColon",
                                      "X-Fold: a\r\n  b",
                                      ": empty-name",
                                      std::string("X-Nul: a\0b", 10),
                                      "x-gateway-inference-objective: interactive",
                                      "x-gateway-inference-fairness-id: \x01\x02",
                                      "Expect: 100-continue",
                                      "Connection: close"};
      const std::string& h = kHeaders[pick(8)];
      return {request("POST", "/v1/completions", "HTTP/1.1",
                      {json, contentLength(kHostileInputBody.size()), h}, kHostileInputBody),
              false, "odd-header"};
    }
    default: {  // random bytes
      std::string r(1 + pick(300), '\0');
      for (char& c : r) c = static_cast<char>(rng());
      if (pick(2) == 0) r = "POST /v1/completions HTTP/1.1\r\n" + r;
      return {r, false, "random"};
    }
  }
}

int connectTo(const ChildProcess& p) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(p.port()));
  ::inet_pton(AF_INET, p.host().c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Sends `bytes` (stopping quietly if the gateway closes first) and reads until the gateway closes
// or `idle` passes without a byte.
std::string exchange(int fd, const std::string& bytes, std::chrono::milliseconds idle) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string in;
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(idle.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  return in;
}

struct Response {
  int status = 0;
  std::string body;
};

// Splits `in` into complete HTTP/1.1 responses (1xx interim ones dropped); nullopt with `why`
// when the bytes are not that.
std::optional<std::vector<Response>> parseResponses(std::string_view in, std::string& why) {
  std::vector<Response> out;
  while (!in.empty()) {
    const std::size_t end = in.find("\r\n\r\n");
    if (end == std::string_view::npos) {
      why = "a response head without its end";
      return std::nullopt;
    }
    const std::string head(in.substr(0, end));
    in.remove_prefix(end + 4);
    if ((head.rfind("HTTP/1.1 ", 0) != 0 && head.rfind("HTTP/1.0 ", 0) != 0) || head.size() < 12) {
      why = "not an HTTP/1.x status line: " + head.substr(0, 40);
      return std::nullopt;
    }
    Response r;
    r.status = std::atoi(head.c_str() + 9);
    if (r.status < 100 || r.status > 599) {
      why = "status out of range";
      return std::nullopt;
    }
    const std::string h = asciiLower(head);
    if (r.status < 200) continue;  // interim (100 Continue): no body
    const std::size_t cl = h.find("\r\ncontent-length:");
    if (h.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
      for (;;) {
        const std::size_t line = in.find("\r\n");
        if (line == std::string_view::npos) {
          why = "a chunk size line without its end";
          return std::nullopt;
        }
        const std::size_t size = std::strtoul(std::string(in.substr(0, line)).c_str(), nullptr, 16);
        in.remove_prefix(line + 2);
        if (in.size() < size + 2) {
          why = "a chunk cut short";
          return std::nullopt;
        }
        r.body.append(in.substr(0, size));
        in.remove_prefix(size + 2);
        if (size == 0) break;
      }
    } else if (cl != std::string::npos) {
      const std::size_t n = std::strtoul(h.c_str() + cl + 17, nullptr, 10);
      if (in.size() < n) {
        why = "a body shorter than its Content-Length";
        return std::nullopt;
      }
      r.body = std::string(in.substr(0, n));
      in.remove_prefix(n);
    } else {
      why = "a response without Content-Length or chunked framing";
      return std::nullopt;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::size_t countOf(std::string_view s, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string_view::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The model server of these tests: 64 slots (never the bottleneck), `tokenMs` per token, no
// prefill.
std::unique_ptr<ChildProcess> startFakeServer(const std::string& dir, int tokenMs) {
  return std::make_unique<ChildProcess>(
      "model-server",
      std::vector<std::string>{HOLDBACK_MODEL_SERVER, "--port", "0", "--slots", "64", "--token-ms",
                               std::to_string(tokenMs), "--prefill-ms", "0", "--model",
                               "fake-model"},
      dir);
}

TEST(GatewayHostileInputE2ETest, EveryConnectionGetsWellFormedRepliesAndTheGatewayStaysUp) {
  const std::string dir = makeScratchDir("holdback-gateway-hostile");
  const auto started = startFakeServer(dir, 1);
  ChildProcess& server = *started;
  ASSERT_TRUE(server.startedOk()) << server.error();
  ChildProcess gateway(
      "gateway",
      {HOLDBACK_GATEWAY, "--endpoint", server.url(), "--listen", "127.0.0.1:0",
       "--header-timeout-ms", "400", "--body-timeout-ms", "400", "--max-header-bytes", "4096"},
      dir);
  ASSERT_TRUE(gateway.startedOk()) << gateway.error();

  constexpr int kCases = 240;
  constexpr int kWorkers = 16;
  // A fixed seed in CI; HOLDBACK_HOSTILE_SEED=N explores others.
  const char* seedText = std::getenv("HOLDBACK_HOSTILE_SEED");
  std::mt19937 rng(seedText != nullptr ? static_cast<unsigned>(std::strtoul(seedText, nullptr, 10))
                                       : 20261202u);
  std::vector<Case> cases;
  for (int i = 0; i < kCases; ++i) cases.push_back(makeCase(rng));

  std::mutex mu;
  std::vector<std::string> failures;
  int answeredComplete = 0;
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      for (int i = next++; i < kCases; i = next++) {
        const Case& c = cases[static_cast<std::size_t>(i)];
        const int fd = connectTo(gateway);
        if (fd < 0) {
          std::lock_guard lock(mu);
          failures.push_back("case " + std::to_string(i) + ": connect failed");
          continue;
        }
        const std::string in = exchange(fd, c.bytes, 1500ms);
        ::close(fd);
        std::string why;
        const auto responses = parseResponses(in, why);
        std::string problem;
        if (!responses) {
          problem = why;
        } else {
          // Each head end can close a request, and the bytes after the last one can be one more
          // (malformed) attempt, answered with a 400.
          const std::size_t bound = countOf(c.bytes, "\r\n\r\n") + 1;
          if (responses->size() > bound) {
            problem = std::to_string(responses->size()) + " responses, more than the " +
                      std::to_string(bound) + " requests the bytes could hold";
          }
          if (c.complete && responses->size() != 1) {
            problem = std::to_string(responses->size()) + " responses to one complete request";
          }
          for (const Response& r : *responses) {
            if (r.status >= 400 && !isOpenAiErrorBody(r.body)) {
              problem = "status " + std::to_string(r.status) +
                        " without a JSON error body: " + r.body.substr(0, 80);
            }
          }
        }
        std::lock_guard lock(mu);
        if (c.complete && responses && responses->size() == 1) ++answeredComplete;
        if (!problem.empty()) {
          failures.push_back("case " + std::to_string(i) + " (" + c.kind + "): " + problem +
                             "; sent " + std::to_string(c.bytes.size()) + " bytes, got " +
                             in.substr(0, 120));
        }
      }
    });
  }
  for (auto& t : workers) t.join();

  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(answeredComplete, kCases / 5) << "the generator should make many complete requests";

  // Still up, and serving.
  EXPECT_FALSE(gateway.waitExit(10ms).has_value()) << "the gateway exited";
  auto client = clientFor(gateway, 10s);
  auto ok = client.post("/v1/completions", kHostileInputBody, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto health = client.get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

// Waits up to `limit` for the gateway to close `fd` (EOF or reset, after reading anything it
// still sends); the time it took, or nullopt when it stayed open.
std::optional<std::chrono::milliseconds> closedWithin(int fd, std::chrono::milliseconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  char buf[4096];
  for (;;) {
    const auto left = limit - std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - t0);
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - t0);
    }
  }
}

// The read that waits for a kept-alive connection's next request is started while the previous
// one is served (it is also the hang-up watch): pipelined requests, a request sent after the
// previous reply, and --idle-timeout-s, counted from the end of the last reply, all still hold.
TEST(GatewayHostileInputE2ETest, KeptAliveConnectionsServeEachRequestAndCloseWhenIdle) {
  const std::string dir = makeScratchDir("holdback-gateway-idle");
  const auto started = startFakeServer(dir, 1);
  ChildProcess& server = *started;
  ASSERT_TRUE(server.startedOk()) << server.error();
  ChildProcess gateway("gateway",
                       {HOLDBACK_GATEWAY, "--endpoint", server.url(), "--listen", "127.0.0.1:0",
                        "--idle-timeout-s", "1"},
                       dir);
  ASSERT_TRUE(gateway.startedOk()) << gateway.error();
  const double timeouts0 =
      metricValue(getMetrics(gateway), "holdback_gateway_client_timeouts_total").value_or(0);
  const std::string one =
      request("POST", "/v1/completions", "HTTP/1.1",
              {"Content-Type: application/json", contentLength(kHostileInputBody.size())},
              kHostileInputBody);

  // A connection that never sends a byte is closed after the idle timeout.
  const int silent = connectTo(gateway);
  ASSERT_GE(silent, 0);
  // Two requests in one write, then a third after their replies, on one connection.
  const int kept = connectTo(gateway);
  ASSERT_GE(kept, 0);
  std::string why;
  const std::string first = exchange(kept, one + one, 300ms);
  const auto pair = parseResponses(first, why);
  ASSERT_TRUE(pair) << why << ": " << first.substr(0, 200);
  ASSERT_EQ(pair->size(), 2u) << first.substr(0, 400);
  const std::string second = exchange(kept, one, 300ms);
  const auto third = parseResponses(second, why);
  ASSERT_TRUE(third) << why << ": " << second.substr(0, 200);
  ASSERT_EQ(third->size(), 1u) << second.substr(0, 400);
  for (const auto& r : {(*pair)[0], (*pair)[1], (*third)[0]}) EXPECT_EQ(r.status, 200);

  // Idle since its last reply (about 0.3 s ago): closed within the rest of the second.
  const auto keptClosed = closedWithin(kept, 3s);
  ASSERT_TRUE(keptClosed.has_value()) << "the idle kept-alive connection stayed open";
  EXPECT_LT(*keptClosed, 1500ms);
  const auto silentClosed = closedWithin(silent, 3s);
  ASSERT_TRUE(silentClosed.has_value()) << "the silent connection stayed open";
  ::close(kept);
  ::close(silent);
  const double timeouts1 =
      metricValue(getMetrics(gateway), "holdback_gateway_client_timeouts_total").value_or(0);
  EXPECT_GE(timeouts1 - timeouts0, 2);
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

// A client that sends two requests in one write and leaves while the first is generating: its
// pipelined bytes are already buffered when the first is proxied, so no read of the socket is in
// progress; the hang-up is still noticed (a readiness wait) and the first request's upstream
// exchange aborted at once instead of running to its end.
TEST(GatewayHostileInputE2ETest, AClientThatPipelinesAndLeavesHasItsUpstreamRequestAborted) {
  const std::string dir = makeScratchDir("holdback-gateway-pipeline-leave");
  const auto started = startFakeServer(dir, 20);
  ChildProcess& server = *started;
  ASSERT_TRUE(server.startedOk()) << server.error();
  ChildProcess gateway(
      "gateway", {HOLDBACK_GATEWAY, "--endpoint", server.url(), "--listen", "127.0.0.1:0"}, dir);
  ASSERT_TRUE(gateway.startedOk()) << gateway.error();
  // 100 tokens of 20 ms: 2 s of generation for the first request.
  const std::string longBody = R"({"model":"fake-model","prompt":"hi","max_tokens":100})";
  const std::string one =
      request("POST", "/v1/completions", "HTTP/1.1",
              {"Content-Type: application/json", contentLength(longBody.size())}, longBody);
  const double aborted0 =
      metricValue(getMetrics(gateway), "holdback_gateway_upstream_aborted_total").value_or(0);
  const int fd = connectTo(gateway);
  ASSERT_GE(fd, 0);
  const std::string both = one + one;
  ASSERT_EQ(::send(fd, both.data(), both.size(), MSG_NOSIGNAL), static_cast<ssize_t>(both.size()));
  std::this_thread::sleep_for(300ms);  // the first is generating
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  double aborted = aborted0;
  bool serverIdle = false;
  while (std::chrono::steady_clock::now() - t0 < 1s) {
    aborted =
        metricValue(getMetrics(gateway), "holdback_gateway_upstream_aborted_total").value_or(0);
    const std::string m = getMetrics(server);
    serverIdle = metricValue(m, "vllm:num_requests_running").value_or(1) == 0 &&
                 metricValue(m, "vllm:num_requests_waiting").value_or(1) == 0;
    if (aborted > aborted0 && serverIdle) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(aborted - aborted0, 1) << "the first request's upstream exchange was not aborted";
  EXPECT_TRUE(serverIdle) << "the model server still runs the departed client's request";
  if (HasFailure()) std::cerr << gateway.stderrTail() << "\n";
}

}  // namespace
}  // namespace holdback_e2e
