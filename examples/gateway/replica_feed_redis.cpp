// The replica feed over Redis pub/sub (replica_feed.hpp).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "redis_reply.hpp"
#include "replica_feed.hpp"

namespace holdback::gateway {
namespace {

constexpr const char* kChannel = "holdback:feed";
constexpr auto kHeartbeat = std::chrono::milliseconds(100);
constexpr int kSilenceMs = 500;  // no message for this long: the feed is down
constexpr auto kRetry = std::chrono::milliseconds(200);
constexpr std::size_t kRing = 1 << 16;  // events queued and not yet published
// A replica not heard from for this long is gone: its requests still in flight are completed.
constexpr auto kSourceExpiry = std::chrono::seconds(2);

struct Event {
  char kind = 'D';          // 'D' dispatch, 'C' completion, 'A' arrival
  std::uint32_t index = 0;  // D, C: the endpoint (pool order)
  std::int64_t tokens = 0;  // D, C: tokens; A: kvTokens
  Priority priority = 0;    // A
};

using Reply = RedisReply;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

// A connection with `timeoutMs` on connect and on every command; nullptr and `error` set on
// failure.
Context connectTo(const HostPort& where, int timeoutMs, std::string& error) {
  const timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  Context c(redisConnectWithTimeout(where.host.c_str(), where.port, tv));
  if (!c) {
    error = "connect: out of memory";
    return nullptr;
  }
  if (c->err != 0 || redisSetTimeout(c.get(), tv) != REDIS_OK) {
    error = std::string("connect: ") + c->errstr;
    return nullptr;
  }
  return c;
}

class RedisReplicaFeed final : public ReplicaFeed {
 public:
  RedisReplicaFeed(HostPort redis, std::vector<std::string> urls, Pool& pool,
                   FlowController& controller, GatewayCounters& counters)
      : redis_(std::move(redis)),
        urls_(std::move(urls)),
        pool_(pool),
        controller_(controller),
        counters_(counters),
        ring_(kRing),
        batch_(kRing) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::random_device rd;
    self_ = std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    for (std::size_t i = 0; i < urls_.size() && i < pool_.size(); ++i) by_url_.emplace(urls_[i], i);
    publisher_ = std::thread([this] { publish(); });
    subscriber_ = std::thread([this] { subscribe(); });
  }
  ~RedisReplicaFeed() override {
    {
      const std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    publisher_.join();
    subscriber_.join();
    pool_.ledger().setPeerFeed(false);
  }
  RedisReplicaFeed(const RedisReplicaFeed&) = delete;
  RedisReplicaFeed& operator=(const RedisReplicaFeed&) = delete;

  void dispatched(std::size_t endpoint, std::int64_t tokens) noexcept override {
    queue({'D', static_cast<std::uint32_t>(endpoint), tokens, 0});
  }
  void completed(std::size_t endpoint, std::int64_t tokens) noexcept override {
    queue({'C', static_cast<std::uint32_t>(endpoint), tokens, 0});
  }
  void arrived(Priority priority, std::int64_t kvTokens) noexcept override {
    queue({'A', 0, kvTokens, priority});
  }
  [[nodiscard]] bool live() const noexcept override {
    return live_.load(std::memory_order_relaxed);
  }

 private:
  void queue(const Event& e) noexcept {
    bool was_empty = false;
    {
      const std::lock_guard lock(mu_);
      if (queued_ == kRing) {
        counters_.replicaFeedDropped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      ring_[(head_ + queued_) % kRing] = e;
      was_empty = queued_++ == 0;
    }
    if (was_empty) wake_.notify_one();
  }

  // "<id>\n" then one line per event (the heartbeat: no line).
  std::string message(std::size_t n) const {
    std::string m = self_;
    m += '\n';
    char line[64];
    for (std::size_t i = 0; i < n; ++i) {
      const Event& e = batch_[i];
      if (e.kind == 'A') {
        std::snprintf(line, sizeof line, "A %lld %d\n", static_cast<long long>(e.tokens),
                      static_cast<int>(e.priority));
        m += line;
      } else if (e.index < urls_.size()) {
        std::snprintf(line, sizeof line, "%c %lld ", e.kind, static_cast<long long>(e.tokens));
        m += line;
        m += urls_[e.index];
        m += '\n';
      }
    }
    return m;
  }

  void publish() {
    Context ctx;
    std::unique_lock lock(mu_);
    while (!stop_) {
      wake_.wait_for(lock, kHeartbeat, [this] { return stop_ || queued_ > 0; });
      if (stop_) break;
      const std::size_t n = queued_;
      for (std::size_t i = 0; i < n; ++i) batch_[i] = ring_[(head_ + i) % kRing];
      head_ = (head_ + n) % kRing;
      queued_ = 0;
      lock.unlock();
      bool sent = false;
      try {
        const std::string m = message(n);
        std::string error;
        if (!ctx) ctx = connectTo(redis_, kSilenceMs, error);
        if (ctx) {
          Reply r(static_cast<redisReply*>(
              redisCommand(ctx.get(), "PUBLISH %s %b", kChannel, m.data(), m.size())));
          sent = r && r->type == REDIS_REPLY_INTEGER;
          if (!sent) ctx.reset();
        }
      } catch (...) {  // allocation failure: the batch is lost, as on a failed publish
        ctx.reset();
      }
      (sent ? counters_.replicaFeedSent : counters_.replicaFeedDropped)
          .fetch_add(n, std::memory_order_relaxed);
      lock.lock();
      if (!sent) wake_.wait_for(lock, kRetry, [this] { return stop_; });
    }
  }

  void setLive(bool live, const std::string& why) {
    if (live_.exchange(live, std::memory_order_relaxed) == live) return;
    pool_.ledger().setPeerFeed(live);
    counters_.replicaFeedLive.store(live ? 1 : 0, std::memory_order_relaxed);
    if (live) {
      std::fprintf(stderr, "holdback-gateway: replica feed: redis %s:%d: live\n",
                   redis_.host.c_str(), redis_.port);
    } else {
      std::fprintf(stderr,
                   "holdback-gateway: replica feed: redis %s:%d down (%s): counting the synced "
                   "sums or the 1/R share until it is back\n",
                   redis_.host.c_str(), redis_.port, why.c_str());
    }
  }

  // What another replica has in flight per endpoint, as its events told (the subscriber's alone).
  struct Source {
    std::vector<std::int64_t> requests;
    std::vector<std::int64_t> tokens;
    std::chrono::steady_clock::time_point seen;
  };

  // Completes, in the ledger, what `s` still had in flight (a replica gone, or events lost).
  void forget(const Source& s) {
    for (std::size_t i = 0; i < s.requests.size(); ++i) {
      const EndpointId id = pool_.ledgerId(i);
      for (std::int64_t n = 0; n < s.requests[i]; ++n) {
        (void)pool_.ledger().recordPeerCompletion(id, n == 0 ? s.tokens[i] : 0);
      }
    }
  }
  void forgetAll() {
    for (const auto& [id, s] : sources_) forget(s);
    sources_.clear();
  }
  void forgetSilent(std::chrono::steady_clock::time_point now) {
    for (auto it = sources_.begin(); it != sources_.end();) {
      if (now - it->second.seen > kSourceExpiry) {
        forget(it->second);
        it = sources_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // One message's events from another replica, applied.
  void apply(const char* data, std::size_t len) {
    const std::string text(data, len);
    const std::size_t eol = text.find('\n');
    const auto now = std::chrono::steady_clock::now();
    if (now - last_sweep_ > kSourceExpiry / 4) {
      forgetSilent(now);
      last_sweep_ = now;
    }
    if (eol == std::string::npos || text.compare(0, eol, self_) == 0) return;
    Source& source = sources_[text.substr(0, eol)];
    if (source.requests.empty()) {
      source.requests.assign(pool_.size(), 0);
      source.tokens.assign(pool_.size(), 0);
    }
    source.seen = now;
    std::size_t at = eol + 1;
    while (at < text.size()) {
      std::size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      at = end + 1;
      char kind = 0;
      long long tokens = 0;
      int used = 0;
      if (std::sscanf(line.c_str(), "%c %lld %n", &kind, &tokens, &used) < 2 || used <= 0) continue;
      const std::string rest = line.substr(static_cast<std::size_t>(used));
      if (kind == 'A') {
        controller_.recordPeerArrival(static_cast<Priority>(std::atoi(rest.c_str())), tokens);
      } else if (const auto it = by_url_.find(rest); it != by_url_.end()) {
        const std::size_t i = it->second;
        const EndpointId id = pool_.ledgerId(i);
        if (kind == 'D') {
          (void)pool_.ledger().recordPeerDispatch(id, tokens);
          source.requests[i] += 1;
          source.tokens[i] += std::max(0LL, tokens);
        } else if (kind == 'C' && source.requests[i] > 0) {
          // Only the completion of a dispatch this replica was told of: one whose dispatch it
          // missed (sent before it subscribed, or while the feed was down) or has already
          // completed itself (forget) would otherwise lower the pool's in-flight count for good.
          (void)pool_.ledger().recordPeerCompletion(id, tokens);
          source.requests[i] -= 1;
          source.tokens[i] = std::max<std::int64_t>(0, source.tokens[i] - std::max(0LL, tokens));
        }
      }
      counters_.replicaFeedReceived.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void subscribe() {
    std::string error = "not connected";
    while (!stopping()) {
      Context ctx = connectTo(redis_, kSilenceMs, error);
      if (ctx) {
        Reply r(static_cast<redisReply*>(redisCommand(ctx.get(), "SUBSCRIBE %s", kChannel)));
        if (r && r->type == REDIS_REPLY_ARRAY) {
          setLive(true, "");
          for (;;) {
            void* raw = nullptr;
            if (redisGetReply(ctx.get(), &raw) != REDIS_OK) {
              error = ctx->errstr[0] != '\0' ? ctx->errstr : "no message";
              break;
            }
            const Reply m(static_cast<redisReply*>(raw));
            if (stopping()) break;
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
                m->element[2]->type == REDIS_REPLY_STRING) {
              try {
                apply(m->element[2]->str, m->element[2]->len);
              } catch (...) {  // allocation failure: this message's events are lost
              }
            }
          }
        } else {
          error = ctx->errstr[0] != '\0' ? ctx->errstr : "SUBSCRIBE refused";
        }
      }
      if (stopping()) break;
      setLive(false, error);
      forgetAll();  // what they sent meanwhile is lost: start again from nothing in flight
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, kRetry, [this] { return stop_; });
    }
  }
  bool stopping() {
    const std::lock_guard lock(mu_);
    return stop_;
  }

  HostPort redis_;
  std::vector<std::string> urls_;
  Pool& pool_;
  FlowController& controller_;
  GatewayCounters& counters_;
  std::string self_;
  std::unordered_map<std::string, std::size_t> by_url_;
  std::unordered_map<std::string, Source> sources_;  // the subscriber's alone
  std::chrono::steady_clock::time_point last_sweep_{};
  std::atomic<bool> live_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;         // guarded by mu_
  std::vector<Event> ring_;   // guarded by mu_
  std::size_t head_ = 0;      // guarded by mu_
  std::size_t queued_ = 0;    // guarded by mu_
  std::vector<Event> batch_;  // the publisher's alone
  std::thread publisher_;
  std::thread subscriber_;
};

}  // namespace

std::unique_ptr<ReplicaFeed> ReplicaFeed::start(const HostPort& redis,
                                                std::vector<std::string> endpointUrls, Pool& pool,
                                                FlowController& controller,
                                                GatewayCounters& counters) {
  return std::make_unique<RedisReplicaFeed>(redis, std::move(endpointUrls), pool, controller,
                                            counters);
}

}  // namespace holdback::gateway
