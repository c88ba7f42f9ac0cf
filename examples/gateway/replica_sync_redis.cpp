#include "replica_sync_redis.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <utility>

#include "holdback/detector/replica_sync.hpp"
#include "redis_connection.hpp"
#include "replica_figures_text.hpp"
#include "replica_input.hpp"

namespace holdback::gateway {
namespace {

using L = ReplicaInputLimits;

long long nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The hash fields holding a replica's restoration figures and its config fingerprint (no
// endpoint URL starts with '@').
constexpr const char* kFiguresField = "@restore";
constexpr const char* kFingerprintField = "@fingerprint";

class RedisReplicaSync final : public ReplicaSync {
 public:
  RedisReplicaSync(RedisStore store, std::vector<std::string> endpoints, int ttlMs, int timeoutMs,
                   GatewayCounters& counters)
      : store_(std::move(store)),
        endpoints_(std::move(endpoints)),
        ttl_ms_(ttlMs),
        timeout_ms_(timeoutMs),
        replicas_key_(store_.prefix + "replicas"),
        log_("replica sync", counters.replicaSyncRejected),
        foreign_count_(counters.replicaSyncForeign) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::random_device rd;
    self_ = std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    key_ = replicaKey(self_);
  }
  RedisReplicaSync(const RedisReplicaSync&) = delete;
  RedisReplicaSync& operator=(const RedisReplicaSync&) = delete;

  [[nodiscard]] const std::string& lastError() const { return error_; }

  std::int64_t exchange(std::span<const InFlightLoad> mine, std::span<InFlightLoad> othersSum,
                        const ReplicaRestoreFigures& mineFigures,
                        ReplicaRestoreFigures& othersFigures) noexcept override {
    try {
      return exchangeOrThrow(mine, othersSum, mineFigures, othersFigures);
    } catch (...) {  // allocation failure: a failed round
      error_ = "out of memory";
      conn_.reset();
      return -1;
    }
  }
  // The live replicas' identities sorted: this one's position among them (the last exchange's).
  [[nodiscard]] std::int64_t rank() const noexcept override { return rank_; }
  // The replicas may run on several hosts: they take turns on the wall clock, as the figures'
  // times travel on it.
  [[nodiscard]] Duration clockOffset() const noexcept override {
    return std::chrono::duration_cast<Duration>(
        std::chrono::duration<double>(wallMinusSteadySeconds()));
  }

 private:
  std::string replicaKey(const std::string& id) const { return store_.prefix + "replica:" + id; }
  std::int64_t fail(const char* what, const redisReply* reply = nullptr) {
    if (conn_ && conn_->exceeded()) {
      // A reply larger than any replica writes: counted as well as failing the round.
      log_.reject(RejectReason::kTooLong, std::string("a reply to ") + what, conn_->error());
    }
    error_ = std::string(what) + ": " +
             (reply != nullptr ? replyError(reply)
              : conn_          ? conn_->error()
                               : "not connected");
    conn_.reset();
    return -1;
  }
  bool connect() {
    if (conn_) return true;
    // Replies: the replica set (kMaxReplicas + 1), or a replica's fields.
    const std::size_t elements = std::max(L::kMaxReplyElements, endpoints_.size() + 8);
    conn_ = RedisConnection::open(store_.url, timeout_ms_, elements, error_);
    return conn_ != nullptr;
  }

  // A string value of replica `id`'s hash; nullopt when it is nil (not published) or ignored
  // (counted and logged: another type, or longer than `max`).
  std::optional<std::string_view> field(const redisReply* e, const std::string& id,
                                        std::string_view name, std::size_t max) {
    if (e == nullptr || e->type == REDIS_REPLY_NIL) return std::nullopt;
    if (e->type != REDIS_REPLY_STRING) {
      log_.reject(RejectReason::kWrongType, where(id, name),
                  "reply type " + std::to_string(e->type));
      return std::nullopt;
    }
    const std::string_view v(e->str, e->len);
    if (v.size() > max) {
      log_.reject(RejectReason::kTooLong, where(id, name), v);
      return std::nullopt;
    }
    return v;
  }
  static std::string where(const std::string& id, std::string_view name) {
    return "replica " + printable(id) + ", field " + printable(name);
  }

  std::int64_t exchangeOrThrow(std::span<const InFlightLoad> mine,
                               std::span<InFlightLoad> othersSum,
                               const ReplicaRestoreFigures& mineFigures,
                               ReplicaRestoreFigures& othersFigures) {
    if (!connect()) return -1;
    const long long now = nowMs();
    const double wallMinusSteady = wallMinusSteadySeconds();
    const double nowWall = static_cast<double>(now) / 1000.0;
    std::vector<std::string> hset{"HSET", key_};
    for (std::size_t k = 0; k < mine.size() && k < endpoints_.size(); ++k) {
      hset.push_back(endpoints_[k]);
      hset.push_back(std::to_string(mine[k].requests) + " " + std::to_string(mine[k].tokens));
    }
    hset.push_back(kFiguresField);
    hset.push_back(formatRestoreFigures(mineFigures, wallMinusSteady));
    hset.push_back(kFingerprintField);
    hset.push_back(store_.fingerprint);
    conn_->append(hset);
    conn_->append({"PEXPIRE", key_, std::to_string(ttl_ms_)});
    conn_->append({"ZADD", replicas_key_, std::to_string(now), self_});
    conn_->append({"ZREMRANGEBYSCORE", replicas_key_, "-inf", "(" + std::to_string(now - ttl_ms_)});
    conn_->append({"ZRANGE", replicas_key_, "0", std::to_string(L::kMaxReplicas)});
    RedisReply last;
    for (int i = 0; i < 5; ++i) {
      last = conn_->next();
      if (!last || last->type == REDIS_REPLY_ERROR) return fail("publish", last.get());
    }
    if (last->type != REDIS_REPLY_ARRAY) return fail("replicas", last.get());
    std::vector<std::string> others;
    for (std::size_t i = 0; i < last->elements; ++i) {
      const redisReply* e = last->element[i];
      if (e == nullptr || e->type != REDIS_REPLY_STRING) {
        log_.reject(RejectReason::kWrongType, "the replica set " + printable(replicas_key_),
                    "an element of reply type " + std::to_string(e ? e->type : -1));
        continue;
      }
      std::string id(e->str, e->len);
      if (id == self_) continue;
      if (RejectReason why{}; !validReplicaId(id, why)) {
        log_.reject(why, "a replica identity in " + printable(replicas_key_), id);
        continue;
      }
      if (others.size() == L::kMaxReplicas - 1) {
        log_.reject(RejectReason::kTooMany, "the replica set " + printable(replicas_key_),
                    "more than " + std::to_string(L::kMaxReplicas) + " replicas");
        break;
      }
      others.push_back(std::move(id));
    }
    for (const std::string& id : others) {
      std::vector<std::string> hmget{"HMGET", replicaKey(id)};
      hmget.insert(hmget.end(), endpoints_.begin(), endpoints_.end());
      hmget.emplace_back(kFiguresField);
      hmget.emplace_back(kFingerprintField);
      conn_->append(hmget);
    }
    std::int64_t live = 0;
    std::int64_t below = 0;  // live replicas whose identity sorts before this one's: the rank
    std::int64_t foreign = 0;
    const std::size_t fields = endpoints_.size() + 2;
    for (std::size_t o = 0; o < others.size(); ++o) {
      const RedisReply r = conn_->next();
      if (!r) return fail("read replicas");
      const std::string& id = others[o];
      if (r->type != REDIS_REPLY_ARRAY || r->elements != fields) {
        // WRONGTYPE (a key that is not a hash) or another reply: this replica is ignored.
        log_.reject(RejectReason::kWrongType, "replica " + printable(id),
                    r->type == REDIS_REPLY_ERROR ? replyError(r.get())
                                                 : "reply type " + std::to_string(r->type));
        continue;
      }
      const std::optional<std::string_view> fingerprint =
          field(r->element[fields - 1], id, kFingerprintField, L::kMaxFingerprintBytes);
      if (!fingerprint) {
        // An expired hash reads as all nil: that replica is gone. Values without a fingerprint
        // are not a replica of this build's.
        bool any = false;
        for (std::size_t k = 0; k + 1 < fields; ++k) {
          any |= r->element[k] != nullptr && r->element[k]->type != REDIS_REPLY_NIL;
        }
        if (any) {
          ++foreign;
          log_.foreign(id, "", store_.fingerprint);
        }
        continue;
      }
      if (*fingerprint != store_.fingerprint) {
        ++foreign;
        log_.foreign(id, *fingerprint, store_.fingerprint);
        continue;
      }
      bool any = false;  // a replica counts once a value of it is taken
      for (std::size_t k = 0; k < endpoints_.size() && k < othersSum.size(); ++k) {
        const auto text = field(r->element[k], id, endpoints_[k], L::kMaxPendingBytes);
        if (!text) continue;
        InFlightLoad p;
        if (RejectReason why{}; !parsePending(*text, p, why)) {
          log_.reject(why, where(id, endpoints_[k]), *text);
          continue;
        }
        any = true;
        othersSum[k].requests = saturatingAdd(othersSum[k].requests, p.requests, L::kMaxPending);
        othersSum[k].tokens = saturatingAdd(othersSum[k].tokens, p.tokens, L::kMaxPending);
      }
      if (const auto text =
              field(r->element[endpoints_.size()], id, kFiguresField, L::kMaxFiguresBytes)) {
        ReplicaRestoreFigures f;
        if (RejectReason why{}; parseRestoreFigures(*text, wallMinusSteady, nowWall, f, why)) {
          any = true;
          othersFigures += f;
        } else {
          log_.reject(why, where(id, kFiguresField), *text);
        }
      }
      if (any) {
        ++live;
        if (id < self_) ++below;
      }
    }
    foreign_count_.store(foreign, std::memory_order_relaxed);
    rank_ = below;
    return live;
  }

  RedisStore store_;
  std::vector<std::string> endpoints_;
  int ttl_ms_;
  int timeout_ms_;
  std::string replicas_key_;
  std::string self_;
  std::string key_;
  std::unique_ptr<RedisConnection> conn_;
  std::string error_;
  std::int64_t rank_ = -1;
  ReplicaInputLog log_;
  std::atomic<std::int64_t>& foreign_count_;
};

class RedisSyncThread final : public ReplicaSyncThread {
 public:
  RedisSyncThread(const RedisStore& redis, std::vector<std::string> endpointUrls, Pool& pool,
                  ReplicaPort replicas, GatewayCounters& counters, int intervalMs, int ttlMs,
                  const ReplicaFeed* feed)
      : redis_(redis.url.describe()),
        replicas_(std::move(replicas)),
        feed_(feed),
        sync_(redis, std::move(endpointUrls), ttlMs, redisTimeoutMs(intervalMs), counters),
        syncer_(pool.ledger(), sync_, ids(pool)),
        counters_(counters),
        interval_(intervalMs) {
    std::fprintf(stderr,
                 "holdback-gateway: replica sync: redis %s, key prefix %s, config fingerprint %s\n",
                 redis_.c_str(), redis.prefix.c_str(), redis.fingerprint.c_str());
    thread_ = std::thread([this] { run(); });
  }
  ~RedisSyncThread() override {
    {
      const std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  RedisSyncThread(const RedisSyncThread&) = delete;
  RedisSyncThread& operator=(const RedisSyncThread&) = delete;

 private:
  static std::vector<EndpointId> ids(const Pool& pool) {
    std::vector<EndpointId> out;
    for (std::size_t i = 0; i < pool.size(); ++i) out.push_back(pool.ledgerId(i));
    return out;
  }
  void run() {
    bool failing = false;
    bool first = true;
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      // The pending dispatches for the ledger, the restoration figures for the controller.
      const bool ok = syncer_.syncOnce(replicas_.restoreFigures());
      std::optional<ReplicaShare> share = syncer_.share();
      if (share && feed_ != nullptr) share->pooledArrivals = feed_->live();
      replicas_.setShare(share);
      lock.lock();
      if (ok) {
        counters_.replicaSyncRounds.fetch_add(1, std::memory_order_relaxed);
        counters_.replicaSyncReplicas.store(syncer_.replicasSeen(), std::memory_order_relaxed);
      } else {
        counters_.replicaSyncFailures.fetch_add(1, std::memory_order_relaxed);
      }
      counters_.replicaSyncFallback.store(ok ? 0 : 1, std::memory_order_relaxed);
      if (ok == failing || first) {  // a change (or the first round): say so once
        if (ok) {
          std::fprintf(stderr,
                       "holdback-gateway: replica sync: redis %s: sharing with %lld "
                       "replicas\n",
                       redis_.c_str(), static_cast<long long>(syncer_.replicasSeen()));
        } else {
          std::fprintf(stderr,
                       "holdback-gateway: replica sync: redis %s failed (%s): falling back to "
                       "the 1/R share until it answers\n",
                       redis_.c_str(), sync_.lastError().c_str());
        }
        failing = !ok;
        first = false;
      }
      wake_.wait_for(lock, interval_, [this] { return stop_; });
    }
  }

  std::string redis_;  // RedisUrl::describe(): no password
  const ReplicaPort replicas_;
  const ReplicaFeed* feed_;
  RedisReplicaSync sync_;
  ReplicaSyncer syncer_;
  GatewayCounters& counters_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

std::unique_ptr<ReplicaSyncThread> ReplicaSyncThread::start(const RedisStore& redis,
                                                            std::vector<std::string> endpointUrls,
                                                            Pool& pool, ReplicaPort replicas,
                                                            GatewayCounters& counters,
                                                            int intervalMs, int ttlMs,
                                                            const ReplicaFeed* feed) {
  return std::make_unique<RedisSyncThread>(redis, std::move(endpointUrls), pool,
                                           std::move(replicas), counters, intervalMs, ttlMs, feed);
}

}  // namespace holdback::gateway
