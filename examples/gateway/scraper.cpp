#include "scraper.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "holdback/core/text.hpp"
#include "vllm_telemetry.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kScrapeReadBufferBytes = std::size_t{64} * 1024;

// One GET on `stream` (connecting first when `connected` is false). nullopt on any failure (the
// stream is then closed); the body otherwise.
Task<std::optional<std::string>> get(TcpStream& stream, bool& connected,
                                     const tcp::endpoint& target, const char* path,
                                     std::size_t bodyLimit, bool& tooLarge) {
  tooLarge = false;
  if (!connected) {
    stream.expires_after(1s);
    auto [ec] = co_await stream.async_connect(target, kUse);
    if (ec) {
      stream.close();
      co_return std::nullopt;
    }
    stream.socket().set_option(tcp::no_delay(true), ec);
    connected = true;
  }
  http::request<http::empty_body> req{http::verb::get, path, 11};
  req.set(http::field::host, target.address().to_string() + ":" + std::to_string(target.port()));
  req.keep_alive(true);
  stream.expires_after(1s);
  if (auto [ec, n] = co_await http::async_write(stream, req, kUse); ec) {
    stream.close();
    connected = false;
    co_return std::nullopt;
  }
  // Bounded: the head, chunk headers and trailers of a response fit in 64 KiB (the body goes to
  // the parser's string, bounded by `bodyLimit`).
  beast::flat_buffer buffer(kScrapeReadBufferBytes);
  http::response_parser<http::string_body> parser;
  parser.body_limit(bodyLimit);
  auto [ec, n] = co_await http::async_read(stream, buffer, parser, kUse);
  stream.expires_never();
  // The connection is kept only after a complete final response framed for keep-alive with
  // nothing past its end: an interim (1xx) response, or extra bytes, would be read as the next
  // scrape's answer.
  if (ec || !parser.keep_alive() || buffer.size() != 0 || parser.get().result_int() < 200) {
    tooLarge = ec == http::error::body_limit;
    stream.close();
    connected = false;
    if (ec) co_return std::nullopt;
  }
  if (parser.get().result() != http::status::ok) co_return std::nullopt;
  co_return std::move(parser.get().body());
}

Task<void> scrapeLoop(Gateway& gw, std::size_t i, tcp::endpoint target, DialectChoice choice,
                      std::function<void(const std::vector<std::string>&)> firstRoundDone) {
  auto ex = co_await asio::this_coro::executor;
  TcpStream stream(ex);
  bool connected = false;
  IoTimer timer(ex);
  auto next = std::chrono::steady_clock::now();
  EndpointDialect dialect(std::move(choice), gw.pool().url(i));
  const auto interval = std::chrono::milliseconds(gw.options().scrapeIntervalMs);
  for (std::uint64_t round = 0;; ++round) {
    Pool& pool = gw.pool();
    const ScrapeMark mark = pool.mark(i);  // right before GET /metrics
    bool too_large = false;
    const auto body =
        co_await get(stream, connected, target, "/metrics", gw.options().maxScrapeBytes, too_large);
    if (!body) {
      pool.recordScrapeFailure(i);
      if (too_large) {
        std::fprintf(stderr, "holdback-gateway: %s/metrics: body over --max-scrape-bytes %zu\n",
                     pool.url(i).c_str(), gw.options().maxScrapeBytes);
      }
    } else {
      const ParsedPrometheusText parsed = parsePrometheusText(*body);
      auto telemetry = dialect.read(parsed);
      if (telemetry && (dialect.name() == "vllm" || dialect.name() == "vllm-v0")) {
        // vLLM: the same gauges through vllm_telemetry.hpp, which also reads what only vLLM
        // exports beyond the dialect's quantities.
        if (auto vllm = extractVllmTelemetry(parsed)) telemetry = std::move(vllm);
      }
      pool.setDialect(i, dialect.name());
      if (telemetry) {
        pool.recordScrape(i, *telemetry, Clock::now(), mark, parsed.skippedLines);
        pool.recordCapacity(i, extractCacheConfigInfo(parsed), *telemetry);
      } else {
        pool.recordScrapeFailure(i, parsed.skippedLines);
      }
    }
    if (round % 100 == 0 && gw.options().models.empty()) {
      const auto models =
          co_await get(stream, connected, target, "/v1/models", std::size_t{256} * 1024, too_large);
      if (models) {
        const auto json = jsonNestingExceeds(*models, kMaxJsonNesting)
                              ? nlohmann::json()
                              : nlohmann::json::parse(*models, nullptr, false);
        std::vector<std::string> ids;
        if (json.is_object() && json.contains("data") && json["data"].is_array()) {
          for (const auto& m : json["data"]) {
            if (m.is_object() && m.contains("id") && m["id"].is_string()) {
              ids.push_back(m["id"].get<std::string>());
            }
          }
        }
        gw.setEndpointModels(i, std::move(ids));
      }
    }
    if (round == 0 && firstRoundDone) firstRoundDone(dialect.mappingErrors());
    next += interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind (slow endpoint): no catch-up burst
    timer.expires_at(next);
    auto [ec] = co_await timer.async_wait(kUse);
    if (ec) co_return;
  }
}

}  // namespace

void startScraper(const IoExecutor& ex, Gateway& gw, std::size_t index, const tcp::endpoint& target,
                  DialectChoice dialect,
                  std::function<void(const std::vector<std::string>&)> firstRoundDone) {
  asio::co_spawn(ex, scrapeLoop(gw, index, target, std::move(dialect), std::move(firstRoundDone)),
                 asio::detached);
}

}  // namespace holdback::gateway
