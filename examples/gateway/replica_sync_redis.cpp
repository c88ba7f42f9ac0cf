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
#include "redis_reply.hpp"
#include "replica_figures_text.hpp"

namespace holdback::gateway {
namespace {

constexpr const char* kReplicasKey = "holdback:replicas";

using Reply = RedisReply;

long long nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "<requests> <tokens>" (what a replica publishes per endpoint); false when malformed.
bool parsePending(const redisReply* r, InFlightLoad& out) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return false;
  long long requests = 0;
  long long tokens = 0;
  const std::string text(r->str, r->len);
  if (std::sscanf(text.c_str(), "%lld %lld", &requests, &tokens) != 2) return false;
  out.requests = std::max(0LL, requests);
  out.tokens = std::max(0LL, tokens);
  return true;
}

// The hash field holding a replica's restoration figures (no endpoint URL starts with '@').
constexpr const char* kFiguresField = "@restore";

bool parseFigures(const redisReply* r, ReplicaRestoreFigures& out) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return false;
  return parseRestoreFigures(std::string_view(r->str, r->len), wallMinusSteadySeconds(), out);
}

class RedisReplicaSync final : public ReplicaSync {
 public:
  RedisReplicaSync(HostPort where, std::vector<std::string> endpoints, int ttlMs, int timeoutMs)
      : where_(std::move(where)), endpoints_(std::move(endpoints)), ttl_ms_(ttlMs) {
    timeout_.tv_sec = timeoutMs / 1000;
    timeout_.tv_usec = (timeoutMs % 1000) * 1000;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::random_device rd;
    self_ = std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    key_ = "holdback:replica:" + self_;
  }
  ~RedisReplicaSync() override { disconnect(); }
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
      disconnect();
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
  void disconnect() {
    if (ctx_ != nullptr) redisFree(ctx_);
    ctx_ = nullptr;
  }
  bool fail(const char* what) {
    error_ = std::string(what) + ": " +
             (ctx_ != nullptr && ctx_->err != 0 ? ctx_->errstr : "unexpected reply");
    disconnect();
    return false;
  }
  bool connect() {
    if (ctx_ != nullptr) return true;
    ctx_ = redisConnectWithTimeout(where_.host.c_str(), where_.port, timeout_);
    if (ctx_ == nullptr) {
      error_ = "connect: out of memory";
      return false;
    }
    if (ctx_->err != 0) return fail("connect");
    if (redisSetTimeout(ctx_, timeout_) != REDIS_OK) return fail("set timeout");
    return true;
  }
  // Appends one command of `args` to the pipeline.
  void append(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_, int(argv.size()), argv.data(), lens.data());
  }
  Reply next() {
    void* r = nullptr;
    if (redisGetReply(ctx_, &r) != REDIS_OK) return nullptr;
    return Reply(static_cast<redisReply*>(r));
  }

  std::int64_t exchangeOrThrow(std::span<const InFlightLoad> mine,
                               std::span<InFlightLoad> othersSum,
                               const ReplicaRestoreFigures& mineFigures,
                               ReplicaRestoreFigures& othersFigures) {
    if (!connect()) return -1;
    const long long now = nowMs();
    std::vector<std::string> hset{"HSET", key_};
    for (std::size_t k = 0; k < mine.size() && k < endpoints_.size(); ++k) {
      hset.push_back(endpoints_[k]);
      hset.push_back(std::to_string(mine[k].requests) + " " + std::to_string(mine[k].tokens));
    }
    hset.push_back(kFiguresField);
    hset.push_back(formatRestoreFigures(mineFigures, wallMinusSteadySeconds()));
    append(hset);
    append({"PEXPIRE", key_, std::to_string(ttl_ms_)});
    append({"ZADD", kReplicasKey, std::to_string(now), self_});
    append({"ZREMRANGEBYSCORE", kReplicasKey, "-inf", "(" + std::to_string(now - ttl_ms_)});
    append({"ZRANGE", kReplicasKey, "0", "-1"});
    Reply last;
    for (int i = 0; i < 5; ++i) {
      last = next();
      if (!last || last->type == REDIS_REPLY_ERROR) {
        fail("publish");
        return -1;
      }
    }
    if (last->type != REDIS_REPLY_ARRAY) {
      fail("replicas");
      return -1;
    }
    std::vector<std::string> others;
    for (std::size_t i = 0; i < last->elements; ++i) {
      const redisReply* e = last->element[i];
      if (e->type != REDIS_REPLY_STRING) continue;
      std::string id(e->str, e->len);
      if (id != self_) others.push_back(std::move(id));
    }
    for (const std::string& id : others) {
      std::vector<std::string> hmget{"HMGET", "holdback:replica:" + id};
      hmget.insert(hmget.end(), endpoints_.begin(), endpoints_.end());
      hmget.emplace_back(kFiguresField);
      append(hmget);
    }
    std::int64_t live = 0;
    std::int64_t below = 0;  // live replicas whose identity sorts before this one's: the rank
    for (std::size_t o = 0; o < others.size(); ++o) {
      const Reply r = next();
      if (!r || r->type != REDIS_REPLY_ARRAY) {
        fail("read replicas");
        return -1;
      }
      bool any = false;  // an expired hash reads as all nil: that replica is gone
      for (std::size_t k = 0; k < r->elements && k < othersSum.size(); ++k) {
        InFlightLoad p;
        if (!parsePending(r->element[k], p)) continue;
        any = true;
        othersSum[k].requests += p.requests;
        othersSum[k].tokens += p.tokens;
      }
      ReplicaRestoreFigures f;
      if (r->elements == endpoints_.size() + 1 && parseFigures(r->element[endpoints_.size()], f)) {
        any = true;
        othersFigures += f;
      }
      if (any) {
        ++live;
        if (others[o] < self_) ++below;
      }
    }
    rank_ = below;
    return live;
  }

  HostPort where_;
  std::vector<std::string> endpoints_;
  int ttl_ms_;
  timeval timeout_{};
  std::string self_;
  std::string key_;
  redisContext* ctx_ = nullptr;
  std::string error_;
  std::int64_t rank_ = -1;
};

class RedisSyncThread final : public ReplicaSyncThread {
 public:
  RedisSyncThread(const HostPort& redis, std::vector<std::string> endpointUrls, Pool& pool,
                  FlowController& controller, GatewayCounters& counters, int intervalMs, int ttlMs,
                  const ReplicaFeed* feed)
      : redis_(redis),
        controller_(controller),
        feed_(feed),
        sync_(redis, std::move(endpointUrls), ttlMs, std::max(intervalMs, 50)),
        syncer_(pool.ledger(), sync_, ids(pool)),
        counters_(counters),
        interval_(intervalMs) {
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
      const bool ok = syncer_.syncOnce(controller_.replicaRestoreFigures());
      std::optional<ReplicaShare> share = syncer_.share();
      if (share && feed_ != nullptr) share->pooledArrivals = feed_->live();
      controller_.setReplicaShare(share);
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
                       "holdback-gateway: replica sync: redis %s:%d: sharing with %lld "
                       "replicas\n",
                       redis_.host.c_str(), redis_.port,
                       static_cast<long long>(syncer_.replicasSeen()));
        } else {
          std::fprintf(stderr,
                       "holdback-gateway: replica sync: redis %s:%d failed (%s): falling back to "
                       "the 1/R share until it answers\n",
                       redis_.host.c_str(), redis_.port, sync_.lastError().c_str());
        }
        failing = !ok;
        first = false;
      }
      wake_.wait_for(lock, interval_, [this] { return stop_; });
    }
  }

  HostPort redis_;
  FlowController& controller_;
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

std::unique_ptr<ReplicaSyncThread> ReplicaSyncThread::start(const HostPort& redis,
                                                            std::vector<std::string> endpointUrls,
                                                            Pool& pool, FlowController& controller,
                                                            GatewayCounters& counters,
                                                            int intervalMs, int ttlMs,
                                                            const ReplicaFeed* feed) {
  return std::make_unique<RedisSyncThread>(redis, std::move(endpointUrls), pool, controller,
                                           counters, intervalMs, ttlMs, feed);
}

}  // namespace holdback::gateway
