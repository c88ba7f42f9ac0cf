// A connection to the replicas' Redis, shared by the gateway's two Redis clients (the replica
// sync, replica_sync_redis.cpp, and the replica feed, replica_feed_redis.cpp): connect and command
// timeouts, AUTH and SELECT as the --replica-sync URL says on every (re)connection, and replies
// bounded in size (a bulk string longer than ReplicaInputLimits::kMaxReplyString or an array of
// more elements than the connection allows fails the read, as a broken connection does).
//
// Thread safety: a RedisConnection is used by one thread at a time.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"
#include "redis_reply.hpp"

namespace holdback::gateway {

// What a connection's replies may hold; `exceeded` is set when a reply went past it.
struct RedisReplyLimits {
  std::size_t maxString = 0;
  std::size_t maxElements = 0;
  bool exceeded = false;
};

// The connect and command timeout of the replica sync's and the reservation's connections at a
// sync interval of `intervalMs`: the interval, and at least kMinRedisTimeoutMs, so that a reply
// delayed by a loaded host or a short Redis stall is not taken for Redis being down (which would
// send the replica to its local share, unbooked, for an interval).
inline constexpr int kMinRedisTimeoutMs = 50;
[[nodiscard]] constexpr int redisTimeoutMs(int intervalMs) noexcept {
  return intervalMs > kMinRedisTimeoutMs ? intervalMs : kMinRedisTimeoutMs;
}

class RedisConnection {
 public:
  // Connects to `url` with `timeoutMs` on connect and on every command, then AUTH and SELECT as
  // it says; replies of at most `maxElements` elements. nullptr with `error` set on failure
  // (hiredis' or the server's error text: never the password).
  static std::unique_ptr<RedisConnection> open(const RedisUrl& url, int timeoutMs,
                                               std::size_t maxElements, std::string& error);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  [[nodiscard]] redisContext* get() const noexcept { return ctx_; }
  // Appends one command of `args` to the pipeline.
  void append(const std::vector<std::string>& args);
  // The next reply of the pipeline; null when the read failed (see error()).
  RedisReply next();
  // One command, sent and read.
  RedisReply command(const std::vector<std::string>& args);
  // Why the connection failed: hiredis' error, or "a reply over the size limit".
  [[nodiscard]] std::string error() const;
  // Whether a reply went over the limits (the connection is then unusable).
  [[nodiscard]] bool exceeded() const noexcept { return limits_->exceeded; }

 private:
  RedisConnection(redisContext* ctx, std::unique_ptr<RedisReplyLimits> limits)
      : ctx_(ctx), limits_(std::move(limits)) {}
  redisContext* ctx_;
  std::unique_ptr<RedisReplyLimits> limits_;  // the reader's privdata: outlives ctx_
};

// An error reply's text for a log line (bounded, printable); "unexpected reply" otherwise.
[[nodiscard]] std::string replyError(const redisReply* r);

}  // namespace holdback::gateway
