#include "redis_connection.hpp"

#include <sys/time.h>

#include <type_traits>
#include <utility>

#include "replica_input.hpp"

namespace holdback::gateway {
namespace {

const redisReplyObjectFunctions* g_default = nullptr;  // hiredis' own (set once, read-only)

bool within(const redisReadTask* task, std::size_t n, bool string) {
  auto* limits = static_cast<RedisReplyLimits*>(task->privdata);
  if (limits == nullptr) return true;
  if (n > (string ? limits->maxString : limits->maxElements)) {
    limits->exceeded = true;
    return false;
  }
  return true;
}
void* boundedString(const redisReadTask* task, char* str, size_t len) {
  return within(task, len, true) ? g_default->createString(task, str, len) : nullptr;
}
// The element count is an int in hiredis 0.14, a size_t in 1.x: deduced from the member's type.
template <typename N>
void* boundedArray(const redisReadTask* task, N elements) {
  if constexpr (std::is_signed_v<N>) {
    if (elements < 0) return nullptr;
  }
  return within(task, static_cast<std::size_t>(elements), false)
             ? g_default->createArray(task, elements)
             : nullptr;
}

// hiredis' reply functions with strings and arrays bounded (a null object fails the read).
redisReplyObjectFunctions* boundedFunctions(redisReader* reader) {
  static redisReplyObjectFunctions* const fns = [reader] {
    g_default = reader->fn;
    static redisReplyObjectFunctions f = *reader->fn;
    f.createString = boundedString;
    f.createArray = boundedArray;
    return &f;
  }();
  return fns;
}

}  // namespace

std::string replyError(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR || r->str == nullptr) return "unexpected reply";
  return printable(std::string_view(r->str, r->len), 160);
}

std::unique_ptr<RedisConnection> RedisConnection::open(const RedisUrl& url, int timeoutMs,
                                                       std::size_t maxElements,
                                                       std::string& error) {
  const timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  redisContext* ctx = redisConnectWithTimeout(url.host.c_str(), url.port, tv);
  if (ctx == nullptr) {
    error = "connect: out of memory";
    return nullptr;
  }
  auto limits = std::make_unique<RedisReplyLimits>();
  limits->maxString = ReplicaInputLimits::kMaxReplyString;
  limits->maxElements = maxElements;
  std::unique_ptr<RedisConnection> c(new RedisConnection(ctx, std::move(limits)));
  if (ctx->err != 0 || redisSetTimeout(ctx, tv) != REDIS_OK) {
    error = std::string("connect: ") + ctx->errstr;
    return nullptr;
  }
  ctx->reader->fn = boundedFunctions(ctx->reader);
  ctx->reader->privdata = c->limits_.get();
  if (!url.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!url.user.empty()) auth.push_back(url.user);
    auth.push_back(url.password);
    const RedisReply r = c->command(auth);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      error = "AUTH: " + (r ? replyError(r.get()) : c->error());
      return nullptr;
    }
  }
  if (url.db != 0) {
    const RedisReply r = c->command({"SELECT", std::to_string(url.db)});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      error = "SELECT " + std::to_string(url.db) + ": " + (r ? replyError(r.get()) : c->error());
      return nullptr;
    }
  }
  return c;
}

RedisConnection::~RedisConnection() {
  redisFree(ctx_);
}

void RedisConnection::append(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
}

RedisReply RedisConnection::next() {
  void* r = nullptr;
  if (redisGetReply(ctx_, &r) != REDIS_OK || r == nullptr) return nullptr;
  return RedisReply(static_cast<redisReply*>(r));
}

RedisReply RedisConnection::command(const std::vector<std::string>& args) {
  append(args);
  return next();
}

std::string RedisConnection::error() const {
  if (limits_->exceeded) return "a reply over the size limit";
  return ctx_->err != 0 ? std::string(ctx_->errstr) : std::string("no reply");
}

}  // namespace holdback::gateway
