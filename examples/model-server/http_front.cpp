#include "http_front.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

namespace holdback_examples {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// co_await op(..., kUse) returns a tuple (error_code, results...) instead of throwing.
constexpr auto kUse = asio::as_tuple(asio::use_awaitable);
constexpr auto kKeepAliveTimeout = 2s;  // also bounds how long shutdown waits for idle ones
constexpr auto kReadTimeout = 5s;
constexpr auto kWriteTimeout = 5s;

using Request = http::request<http::string_body>;

// The names of the request's header fields, lowercased, in name order (duplicates in arrival
// order), comma-separated: a test hook that shows what a proxy in front passed on (reply header
// x-received-header-names).
std::string receivedHeaderNames(const Request& req) {
  std::vector<std::string> names;
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    names.push_back(std::move(name));
  }
  std::stable_sort(names.begin(), names.end());
  std::string joined;
  for (const std::string& name : names) {
    if (!joined.empty()) joined += ',';
    joined += name;
  }
  return joined;
}

// False once the client has closed or reset the connection (a non-blocking MSG_PEEK; bytes of a
// pipelined request count as still there).
bool clientStillThere(tcp::socket& socket) {
  char b = 0;
  const ssize_t n = ::recv(socket.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

std::string sseEvent(std::string_view data) {
  std::string event = "data: ";
  event += data;
  event += "\n\n";
  return event;
}

}  // namespace

// One client connection: reads requests, routes them, writes the replies.
class HttpFront::Connection {
 public:
  Connection(HttpFront& front, tcp::socket socket)
      : front_(front), model_(front.model_), stream_(std::move(socket)) {}

  asio::awaitable<void> run() {
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(64 * 1024);
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      stream_.expires_after(buffer_.size() == 0 ? kKeepAliveTimeout : kReadTimeout);
      auto [hec, hn] = co_await http::async_read_header(stream_, buffer_, parser, kUse);
      if (hec) {
        if (isBadRequest(hec)) co_await writeSimple(11, 400, false);
        break;
      }
      if (!parser.is_done()) {
        stream_.expires_after(kReadTimeout);
        if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
          http::response<http::empty_body> cont{http::status::continue_, 11};
          auto [cec, cn] = co_await http::async_write(stream_, cont, kUse);
          if (cec) break;
        }
        auto [bec, bn] = co_await http::async_read(stream_, buffer_, parser, kUse);
        if (bec) {
          if (isBadRequest(bec)) co_await writeSimple(11, 400, false);
          break;
        }
      }
      stream_.expires_never();
      const Request req = parser.release();
      const bool keep = co_await route(req);
      if (!keep || !req.keep_alive() || front_.stopping_) break;
    }
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

 private:
  static bool isBadRequest(const beast::error_code& ec) {
    return ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
           ec != http::error::end_of_stream && ec != http::error::partial_message;
  }

  asio::awaitable<bool> route(const Request& req) {
    std::string_view path = req.target();
    if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
    const bool head = req.method() == http::verb::head;
    if (req.method() == http::verb::post) {
      if (path == "/v1/completions") co_return co_await generate(req, Api::kCompletions);
      if (path == "/v1/chat/completions") co_return co_await generate(req, Api::kChat);
    } else if (req.method() == http::verb::get || head) {
      if (path == "/metrics") {
        co_return co_await writeSimple(req.version(), 200, req.keep_alive(), model_.metrics(),
                                       "text/plain; version=0.0.4; charset=utf-8", head);
      }
      if (path == "/health") co_return co_await writeSimple(req.version(), 200, req.keep_alive());
      if (path == "/v1/models") {
        co_return co_await writeSimple(req.version(), 200, req.keep_alive(),
                                       modelsBody(model_.replyContext()), "application/json", head);
      }
    }
    co_return co_await writeSimple(req.version(), 404, req.keep_alive());
  }

  // A whole reply: `body` of `contentType` (none when empty), framed with Content-Length; no body
  // for HEAD. True when written and the connection stays open.
  asio::awaitable<bool> writeSimple(unsigned version, unsigned status, bool keepAlive,
                                    std::string body = {}, std::string_view contentType = {},
                                    bool head = false, std::string_view receivedNames = {}) {
    http::response<http::string_body> res{static_cast<http::status>(status), version};
    if (!contentType.empty()) res.set(http::field::content_type, contentType);
    if (!receivedNames.empty()) res.set("x-received-header-names", receivedNames);
    res.keep_alive(keepAlive);
    res.body() = std::move(body);
    res.prepare_payload();
    if (head) {
      const std::size_t n = res.body().size();
      res.body().clear();
      res.content_length(n);
    }
    stream_.expires_after(kWriteTimeout);
    auto [ec, n] = co_await http::async_write(stream_, res, kUse);
    stream_.expires_never();
    co_return !ec && keepAlive;
  }

  asio::awaitable<bool> writeError(const Request& req, unsigned status,
                                   const std::string& message) {
    return writeSimple(req.version(), status, req.keep_alive(), errorBody(int(status), message),
                       "application/json");
  }

  // POST /v1/completions or /v1/chat/completions.
  asio::awaitable<bool> generate(const Request& req, Api api) {
    Generation g;
    if (auto error = parseGeneration(req.body(), api, g)) {
      co_return co_await writeError(req, 400, *error);
    }
    const std::int64_t kv = g.promptTokens + g.maxTokens;
    const std::int64_t capacity = model_.options().kvCapacityTokens;
    // Pool mode: a sequence alone on the server always runs (the simulator's model).
    if (kv > capacity && !model_.scheduler().poolMode()) {
      co_return co_await writeError(req, 400,
                                    "prompt tokens (" + std::to_string(g.promptTokens) +
                                        ") + max_tokens (" + std::to_string(g.maxTokens) +
                                        ") exceed the KV-cache capacity (" +
                                        std::to_string(capacity) + " tokens)");
    }
    std::optional<BatchScheduler::Slot> slot =
        co_await model_.scheduler().admit(g.promptTokens, g.maxTokens);
    if (!slot) co_return co_await writeError(req, 503, "the server is shutting down");
    model_.counters().promptTokens += static_cast<std::uint64_t>(g.promptTokens);
    const auto start = ModelServer::Clock::now();
    const std::string id = model_.nextId(api);
    if (g.stream) co_return co_await stream(req, g, id, start, *slot);
    co_return co_await whole(req, g, id, start, *slot);
  }

  // Waits for token i (false: the client went away or the server is stopping; the slot is freed).
  // In pool mode the last token also waits for the sequence to leave the batch.
  asio::awaitable<bool> nextToken(BatchScheduler::Slot& slot, ModelServer::Clock::time_point start,
                                  std::int64_t i, bool last) {
    // (No co_await inside a short-circuit condition: GCC 12 miscompiles it.)
    bool ok = clientStillThere(stream_.socket());
    if (ok && model_.scheduler().poolMode()) {
      ok = co_await slot.awaitToken(i, last);
    } else if (ok) {
      ok = co_await slot.sleepUntil(model_.tokenTime(start, i));
    }
    if (!ok) slot.release();
    co_return ok;
  }

  // Not streaming: the tokens are deterministic, so the body (and its Content-Length) is known up
  // front; the head goes out now, the body once the last token is due.
  asio::awaitable<bool> whole(const Request& req, const Generation& g, const std::string& id,
                              ModelServer::Clock::time_point start, BatchScheduler::Slot& slot) {
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "application/json");
    res.set("x-received-header-names", receivedHeaderNames(req));
    res.keep_alive(req.keep_alive());
    res.body() = wholeCompletionBody(model_.replyContext(), g, id);
    res.prepare_payload();
    http::response_serializer<http::string_body> sr{res};
    stream_.expires_after(kWriteTimeout);
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUse);
    stream_.expires_never();
    if (hec) co_return false;  // the slot is freed with it
    for (std::int64_t i = 0; i < g.maxTokens; ++i) {
      if (!co_await nextToken(slot, start, i, i + 1 == g.maxTokens)) co_return false;
      ++model_.counters().generationTokens;
    }
    slot.release();
    ++model_.counters().success;
    stream_.expires_after(kWriteTimeout);
    auto [ec, n] = co_await http::async_write(stream_, sr, kUse);
    stream_.expires_never();
    co_return !ec && res.keep_alive();
  }

  asio::awaitable<bool> writeChunk(const std::string& data) {
    stream_.expires_after(kWriteTimeout);
    auto [ec, n] = co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data)), kUse);
    stream_.expires_never();
    co_return !ec;
  }

  // Streaming (SSE): one event per token when it is due.
  asio::awaitable<bool> stream(const Request& req, const Generation& g, const std::string& id,
                               ModelServer::Clock::time_point start, BatchScheduler::Slot& slot) {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.set("x-received-header-names", receivedHeaderNames(req));
    res.keep_alive(req.keep_alive());
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    stream_.expires_after(kWriteTimeout);
    auto [hec, hn] = co_await http::async_write_header(stream_, sr, kUse);
    stream_.expires_never();
    if (hec) co_return false;
    const ReplyContext& context = model_.replyContext();
    for (std::int64_t i = 0; i < g.maxTokens; ++i) {
      // The client left, or stopping.
      if (!co_await nextToken(slot, start, i, i + 1 == g.maxTokens)) co_return false;
      if (!co_await writeChunk(sseEvent(chunkBody(context, g, id, i)))) {
        slot.release();  // the client went away: free the slot now
        co_return false;
      }
      ++model_.counters().generationTokens;
    }
    slot.release();
    ++model_.counters().success;
    if (g.includeUsage) {
      const bool written = co_await writeChunk(sseEvent(usageChunkBody(context, g, id)));
      if (!written) co_return false;
    }
    if (!co_await writeChunk(sseEvent("[DONE]"))) co_return false;
    stream_.expires_after(kWriteTimeout);
    auto [ec, n] = co_await asio::async_write(stream_, http::make_chunk_last(), kUse);
    stream_.expires_never();
    co_return !ec && res.keep_alive();
  }

  HttpFront& front_;
  ModelServer& model_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

HttpFront::HttpFront(ModelServer& model, std::vector<asio::io_context*> contexts)
    : model_(model), contexts_(std::move(contexts)) {}

HttpFront::~HttpFront() = default;

int HttpFront::listen(const std::string& host, int port) {
  beast::error_code ec;
  tcp::resolver resolver(*contexts_.front());
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (!ec) {
    for (const auto& entry : results) {
      acceptor_ = std::make_unique<tcp::acceptor>(*contexts_.front());
      acceptor_->open(entry.endpoint().protocol(), ec);
      if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec) acceptor_->bind(entry.endpoint(), ec);
      if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
      if (!ec) return acceptor_->local_endpoint().port();
    }
  }
  acceptor_.reset();
  std::fprintf(stderr, "holdback-model-server: cannot listen on %s:%d: %s\n", host.c_str(), port,
               ec.message().c_str());
  return -1;
}

void HttpFront::startAccepting() {
  asio::co_spawn(
      *contexts_.front(),
      [this]() -> asio::awaitable<void> {
        std::size_t next = 0;
        for (;;) {
          asio::io_context& ctx = *contexts_[next++ % contexts_.size()];
          auto [ec, socket] = co_await acceptor_->async_accept(ctx, kUse);
          if (ec == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
          if (ec) {  // e.g. out of file descriptors: back off briefly
            asio::steady_timer t(co_await asio::this_coro::executor, 10ms);
            co_await t.async_wait(kUse);
            continue;
          }
          ++open_;
          auto connection = std::make_shared<Connection>(*this, std::move(socket));
          asio::co_spawn(
              ctx,
              [this, connection]() -> asio::awaitable<void> {
                struct Closed {
                  std::atomic<int>& open;
                  ~Closed() { --open; }
                } closed{open_};
                co_await connection->run();
              },
              asio::detached);
        }
      },
      asio::detached);
}

void HttpFront::shutdown(std::function<void()> done) {
  asio::co_spawn(
      *contexts_.front(),
      [this, done = std::move(done)]() -> asio::awaitable<void> {
        stopping_ = true;
        beast::error_code ec;
        if (acceptor_) acceptor_->close(ec);
        const auto deadline = std::chrono::steady_clock::now() + 3s;
        asio::steady_timer t(co_await asio::this_coro::executor);
        while (open_ > 0 && std::chrono::steady_clock::now() < deadline) {
          t.expires_after(10ms);
          co_await t.async_wait(kUse);
        }
        done();
      },
      asio::detached);
}

void HttpFront::releaseIoObjects() {
  acceptor_.reset();
}

}  // namespace holdback_examples
