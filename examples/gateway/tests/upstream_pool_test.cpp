// UpstreamPool (upstream.hpp) against a local listener on a loopback port: the idle cap follows
// the demand of the last two --upstream-idle-ms periods and falls back to --upstream-max-idle
// after two quiet ones; --upstream-max-connections refuses a new connection (kConnectionLimit,
// no connect attempted), and proxy() answers that with 503, not the server's 502.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway.hpp"
#include "net.hpp"
#include "options.hpp"
#include "proxy_heads.hpp"
#include "upstream.hpp"

namespace holdback::gateway {
namespace {

// A loopback listener that accepts and holds every connection (never answers), counting them.
class HoldingListener {
 public:
  explicit HoldingListener(asio::io_context& io)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    acceptNext();
  }
  [[nodiscard]] tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }
  [[nodiscard]] std::size_t accepted() const { return held_.size(); }

 private:
  void acceptNext() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket s) {
      if (ec) return;
      held_.push_back(std::make_unique<tcp::socket>(std::move(s)));
      acceptNext();
    });
  }
  tcp::acceptor acceptor_;
  std::vector<std::unique_ptr<tcp::socket>> held_;
};

// Runs `body` as a coroutine on `io` to completion (the listener's accepts run alongside).
void runUpstreamTest(asio::io_context& io, std::function<Task<void>()> body) {
  bool done = false;
  asio::co_spawn(io, body(), [&done](const std::exception_ptr& e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  while (!done) io.run_one();
}

// Lets the listener's pending accepts complete (up to a second).
std::size_t acceptedBy(asio::io_context& io, const HoldingListener& server, std::size_t n) {
  for (int k = 0; k < 100 && server.accepted() < n; ++k) {
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return server.accepted();
}

Options upstreamTestOptions() {
  Options o;
  o.upstreamMaxIdle = 2;
  o.upstreamIdleMs = 200;
  o.upstreamMaxConnections = 3;
  o.upstreamConnectMs = 2000;
  return o;
}

// A pool of one endpoint, the listener, over one io_context.
struct UpstreamPoolSetup {
  asio::io_context io;
  HoldingListener server{io};
  const Options options = upstreamTestOptions();
  GatewayCounters counters;
  UpstreamPool pool{io.get_executor(), {server.endpoint()}, options, counters};

  // `n` new connections to the endpoint, each expected to succeed.
  Task<std::vector<std::unique_ptr<UpstreamConnection>>> connectMany(int n) {
    std::vector<std::unique_ptr<UpstreamConnection>> held;
    for (int k = 0; k < n; ++k) {
      beast::error_code ec;
      held.push_back(co_await pool.connect(0, ec));
      EXPECT_FALSE(ec) << ec.message();
      EXPECT_NE(held.back(), nullptr);
    }
    co_return held;
  }
};

TEST(UpstreamPoolTest, IdleCapFollowsDemandAndExpiredIdleConnectionsAreDropped) {
  UpstreamPoolSetup t;
  auto& [io, server, options, counters, pool] = t;
  EXPECT_EQ(pool.idleCap(0), 2U);  // no demand yet: --upstream-max-idle

  runUpstreamTest(io, [&]() -> Task<void> {
    // Three at once: above --upstream-max-idle, so the pool keeps all three when they come back.
    std::vector<std::unique_ptr<UpstreamConnection>> held = co_await t.connectMany(3);
    EXPECT_EQ(pool.openConnections(0), 3U);
    EXPECT_EQ(pool.idleCap(0), 3U);
    for (auto& c : held) pool.release(0, std::move(c));
    EXPECT_EQ(pool.openConnections(0), 3U);  // all three kept idle: no churn
    // Reused, not reconnected.
    const auto connects = counters.upstreamConnects.load();
    auto reused = pool.takeIdle(0);
    EXPECT_NE(reused, nullptr);
    EXPECT_EQ(counters.upstreamConnects.load(), connects);
    EXPECT_EQ(counters.upstreamReuses.load(), 1U);
    pool.release(0, std::move(reused));

    // Idle for longer than --upstream-idle-ms: dropped when taken, not reused.
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * options.upstreamIdleMs + 50));
    EXPECT_EQ(pool.takeIdle(0), nullptr);  // all expired: dropped
    EXPECT_EQ(pool.openConnections(0), 0U);
    co_return;
  });
  EXPECT_EQ(acceptedBy(io, server, 3), 3U);
}

TEST(UpstreamPoolTest, IdleCapFallsBackToMaxIdleAfterTwoQuietPeriods) {
  UpstreamPoolSetup t;
  auto& [io, server, options, counters, pool] = t;
  runUpstreamTest(io, [&]() -> Task<void> {
    std::vector<std::unique_ptr<UpstreamConnection>> held = co_await t.connectMany(3);
    for (auto& c : held) pool.release(0, std::move(c));
    EXPECT_EQ(pool.idleCap(0), 3U);
    // Two whole --upstream-idle-ms periods without a checkout; then one request: the cap is
    // --upstream-max-idle again (the demand of three is forgotten).
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * options.upstreamIdleMs + 50));
    EXPECT_EQ(pool.takeIdle(0), nullptr);  // the three idle ones expired: dropped
    beast::error_code ec;
    auto one = co_await pool.connect(0, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(pool.idleCap(0), 2U);
    pool.release(0, std::move(one));
    EXPECT_EQ(pool.openConnections(0), 1U);
    co_return;
  });
}

TEST(UpstreamPoolTest, ConnectionLimitRefusesWithoutConnectingAndProxyAnswers503) {
  UpstreamPoolSetup t;
  auto& [io, server, options, counters, pool] = t;
  runUpstreamTest(io, [&]() -> Task<void> {
    std::vector<std::unique_ptr<UpstreamConnection>> held =
        co_await t.connectMany(t.options.upstreamMaxConnections);
    beast::error_code ec;
    auto refused = co_await pool.connect(0, ec);
    EXPECT_EQ(refused, nullptr);
    EXPECT_EQ(ec, UpstreamPool::kConnectionLimit);
    EXPECT_EQ(counters.upstreamConnects.load(), 3U);  // no fourth connect attempted

    // proxy() over the full pool: 503 (the gateway's own limit), not a 502.
    Request request{http::verb::post, "/v1/completions", 11};
    request.body() = R"({"model":"m","prompt":"hi"})";
    TcpStream client(io.get_executor());
    ProxyRequest what;
    what.endpointUrl = "http://" + pool.hostHeader(0);
    AbortHandle abort;
    std::string error;
    unsigned status = 0;
    const ProxyResult r =
        co_await proxy(pool, options, request, client, what, abort, error, status);
    EXPECT_EQ(r, ProxyResult::kFailedBeforeHead);
    EXPECT_EQ(status, 503U);
    EXPECT_NE(error.find("--upstream-max-connections"), std::string::npos) << error;

    // One released back to the pool: the next request takes it (no new connect needed).
    pool.release(0, std::move(held.back()));
    held.pop_back();
    EXPECT_NE(pool.takeIdle(0), nullptr);
    co_return;
  });
  EXPECT_EQ(acceptedBy(io, server, 3), 3U);
}

// The request framings the gateway reads: none, or one Transfer-Encoding of exactly "chunked";
// anything else would be read as chunked data it is not (the server answers 501).
TEST(ProxyHeadsTest, OnlyAPlainChunkedTransferEncodingIsSupported) {
  const auto with = [](std::vector<std::string> values) {
    Fields f;
    for (const std::string& v : values) f.insert(http::field::transfer_encoding, v);
    return transferCodingSupported(f);
  };
  EXPECT_TRUE(with({}));
  EXPECT_TRUE(with({"chunked"}));
  EXPECT_TRUE(with({" Chunked\t"}));
  EXPECT_FALSE(with({"gzip, chunked"}));
  EXPECT_FALSE(with({"identity"}));
  EXPECT_FALSE(with({"chunked, chunked"}));
  EXPECT_FALSE(with({"chunked", "chunked"}));
  EXPECT_FALSE(with({""}));
  EXPECT_FALSE(with({"xchunked"}));
}

}  // namespace
}  // namespace holdback::gateway
