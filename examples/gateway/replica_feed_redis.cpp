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

#include "redis_connection.hpp"
#include "replica_feed.hpp"
#include "replica_input.hpp"

namespace holdback::gateway {
namespace {

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
using Context = std::unique_ptr<RedisConnection>;
using L = ReplicaInputLimits;

// A connection with `timeoutMs` on connect and on every command (AUTH and SELECT done); nullptr
// and `error` set on failure.
Context connectTo(const RedisUrl& where, int timeoutMs, std::string& error) {
  return RedisConnection::open(where, timeoutMs, 16, error);  // pub/sub replies: 3 elements
}

class RedisReplicaFeed final : public ReplicaFeed {
 public:
  RedisReplicaFeed(const RedisStore& redis, std::vector<std::string> urls, Pool& pool,
                   ReplicaPort replicas, GatewayCounters& counters)
      : redis_(redis.url),
        where_(redis.url.describe()),
        channel_(redis.prefix + "feed" +
                 (redis.url.db != 0 ? ":" + std::to_string(redis.url.db) : std::string())),
        fingerprint_(redis.fingerprint),
        log_("replica feed", counters.replicaSyncRejected),
        urls_(std::move(urls)),
        pool_(pool),
        replicas_(std::move(replicas)),
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

  // An event's tokens as the others take them: in [0, kMaxPending].
  static long long tokensOf(const Event& e) {
    return std::clamp<long long>(e.tokens, 0, L::kMaxPending);
  }
  // "<id> <fingerprint>\n" then one line per event of batch_[from, n) (the heartbeat: no line),
  // up to kFeedMessageSplitBytes; `from` is moved past the events taken.
  std::string message(std::size_t& from, std::size_t n) const {
    std::string m = self_;
    m += ' ';
    m += fingerprint_;
    m += '\n';
    char line[64];
    for (; from < n && m.size() < L::kFeedMessageSplitBytes; ++from) {
      const std::size_t i = from;
      const Event& e = batch_[i];
      if (e.kind == 'A') {
        std::snprintf(line, sizeof line, "A %lld %d\n", tokensOf(e), static_cast<int>(e.priority));
        m += line;
      } else if (e.index < urls_.size()) {
        std::snprintf(line, sizeof line, "%c %lld ", e.kind, tokensOf(e));
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
        std::string error;
        if (!ctx) ctx = connectTo(redis_, kSilenceMs, error);
        std::size_t from = 0;
        do {  // one message at least (the heartbeat), more for a batch over the split size
          const std::string m = message(from, n);
          sent = false;
          if (!ctx) break;
          const Reply r = ctx->command({"PUBLISH", channel_, m});
          sent = r && r->type == REDIS_REPLY_INTEGER;
          if (!sent) ctx.reset();
        } while (sent && from < n);
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
      std::fprintf(stderr, "holdback-gateway: replica feed: redis %s: live\n", where_.c_str());
    } else {
      std::fprintf(stderr,
                   "holdback-gateway: replica feed: redis %s down (%s): counting the synced "
                   "sums or the 1/R share until it is back\n",
                   where_.c_str(), why.c_str());
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

  // One message's events from another replica, applied; what does not pass the checks
  // (replica_input.hpp) is ignored, counted and logged.
  void apply(const char* data, std::size_t len) {
    const std::string_view text(data, len);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_sweep_ > kSourceExpiry / 4) {
      forgetSilent(now);
      last_sweep_ = now;
    }
    const std::size_t eol = text.find('\n');
    const std::string_view header = text.substr(0, eol);
    std::string_view id;
    std::string_view fingerprint;
    if (RejectReason why{}; !parseFeedHeader(header, id, fingerprint, why)) {
      if (why == RejectReason::kFingerprint) {
        log_.foreign(header, "", fingerprint_);
      } else {
        log_.reject(why, "a message's first line", header);
      }
      return;
    }
    if (id == self_) return;
    if (fingerprint != fingerprint_) {
      log_.foreign(id, fingerprint, fingerprint_);
      return;
    }
    auto it = sources_.find(std::string(id));
    if (it == sources_.end()) {
      if (sources_.size() >= L::kMaxReplicas) {
        log_.reject(RejectReason::kTooMany, "the replicas heard on the feed", id);
        return;
      }
      it = sources_.emplace(std::string(id), Source{}).first;
      it->second.requests.assign(pool_.size(), 0);
      it->second.tokens.assign(pool_.size(), 0);
    }
    Source& source = it->second;
    source.seen = now;
    std::size_t at = eol == std::string_view::npos ? text.size() : eol + 1;
    std::size_t events = 0;
    while (at < text.size()) {
      std::size_t end = text.find('\n', at);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view line = text.substr(at, end - at);
      at = end + 1;
      if (++events > L::kMaxFeedEvents) {
        log_.reject(RejectReason::kTooMany, "a message of replica " + printable(id),
                    "more than " + std::to_string(L::kMaxFeedEvents) + " events");
        break;
      }
      FeedEvent e;
      if (RejectReason why{}; !parseFeedEvent(line, e, why)) {
        log_.reject(why, "an event of replica " + printable(id), line);
        continue;
      }
      if (e.kind == 'A') {
        replicas_.recordPeerArrival(e.priority, e.tokens);
      } else if (const auto u = by_url_.find(std::string(e.url)); u != by_url_.end()) {
        const std::size_t i = u->second;
        const EndpointId ledgerId = pool_.ledgerId(i);
        if (e.kind == 'D') {
          (void)pool_.ledger().recordPeerDispatch(ledgerId, e.tokens);
          source.requests[i] = saturatingAdd(source.requests[i], 1, L::kMaxPending);
          source.tokens[i] = saturatingAdd(source.tokens[i], e.tokens, L::kMaxPending);
        } else if (source.requests[i] > 0) {
          // Only the completion of a dispatch this replica was told of: one whose dispatch it
          // missed (sent before it subscribed, or while the feed was down) or has already
          // completed itself (forget) would otherwise lower the pool's in-flight count for good.
          (void)pool_.ledger().recordPeerCompletion(ledgerId, e.tokens);
          source.requests[i] -= 1;
          source.tokens[i] = std::max<std::int64_t>(0, source.tokens[i] - e.tokens);
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
        const Reply r = ctx->command({"SUBSCRIBE", channel_});
        if (r && r->type == REDIS_REPLY_ARRAY) {
          setLive(true, "");
          for (;;) {
            const Reply m = ctx->next();
            if (!m) {
              if (ctx->exceeded()) {
                log_.reject(RejectReason::kTooLong, "a message on " + printable(channel_),
                            ctx->error());
              }
              error = ctx->error();
              break;
            }
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
          error = "SUBSCRIBE: " + (r ? replyError(r.get()) : ctx->error());
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

  RedisUrl redis_;
  std::string where_;  // RedisUrl::describe(): no password
  std::string channel_;
  std::string fingerprint_;
  ReplicaInputLog log_;  // the subscriber's alone
  std::vector<std::string> urls_;
  Pool& pool_;
  const ReplicaPort replicas_;
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

std::unique_ptr<ReplicaFeed> ReplicaFeed::start(const RedisStore& redis,
                                                std::vector<std::string> endpointUrls, Pool& pool,
                                                ReplicaPort replicas, GatewayCounters& counters) {
  return std::make_unique<RedisReplicaFeed>(redis, std::move(endpointUrls), pool,
                                            std::move(replicas), counters);
}

}  // namespace holdback::gateway
