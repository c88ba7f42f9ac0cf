#include "replica_reserve_redis.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "redis_connection.hpp"
#include "replica_input.hpp"
#include "replica_reserve_store.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// How often parked requests are retried without a release of this replica.
constexpr auto kParkedRetry = 2ms;
// Parked requests booked in one script call at most (the reply holds 3 + this many integers).
constexpr std::size_t kMaxBatch = 32;

std::int64_t nowNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

std::string reserverId() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  return std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

class RedisReserver final : public ReplicaReserver {
 public:
  RedisReserver(const RedisStore& redis, std::vector<std::string> urls, Gateway& gw, int intervalMs,
                int leaseMs)
      : url_(redis.url),
        describe_(redis.url.describe()),
        urls_(std::move(urls)),
        gw_(gw),
        c_(gw.counters().replicaReserve),
        store_(redis.prefix, reserverId(), leaseMs),
        interval_(std::chrono::milliseconds(intervalMs)),
        timeout_ms_(redisTimeoutMs(intervalMs)),
        log_("replica reserve", gw.counters().replicaSyncRejected) {
    std::fprintf(stderr,
                 "holdback-gateway: replica reserve: redis %s, replica %s, lease %d ms: every "
                 "dispatch books its slot and KV tokens\n",
                 describe_.c_str(), store_.replicaId().c_str(), leaseMs);
    std::fflush(stderr);
    thread_ = std::thread([this] { run(); });
  }
  ~RedisReserver() override { shutdown(); }
  void shutdown() noexcept override {
    {
      const std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    parked_.clear();  // the thread's own, now that it has stopped
  }
  RedisReserver(const RedisReserver&) = delete;
  RedisReserver& operator=(const RedisReserver&) = delete;

  [[nodiscard]] bool active() const noexcept override {
    return active_.load(std::memory_order_acquire);
  }
  [[nodiscard]] bool stalled() const noexcept override {
    const std::int64_t since = busy_since_.load(std::memory_order_acquire);
    return since != 0 && nowNs() - since > std::chrono::nanoseconds(kTopBandPatience).count();
  }
  void submit(ReserveRequest r) override {
    r.submitted = SteadyClock::now();
    {
      const std::lock_guard lock(mu_);
      submitted_.push_back(std::move(r));
    }
    wake_.notify_one();
  }
  void track(Pool::Dispatch& d, RequestId id) override {
    d.booking = Pool::Dispatch::BookingRelease(this, id);
    {
      const std::lock_guard lock(mu_);
      tracked_.push_back({id, d.endpoint, d.handle.tokens()});
    }
    wake_.notify_one();
  }
  void released(std::uint64_t booking) noexcept override {
    try {
      const std::lock_guard lock(mu_);
      released_.push_back(booking);
    } catch (...) {  // out of memory: the booking stays until the replica restarts
      return;
    }
    wake_.notify_one();
  }

 private:
  struct Live {
    std::size_t endpoint = 0;
    std::int64_t kv = 0;
  };
  struct Tracked {
    std::uint64_t id = 0;
    std::size_t endpoint = 0;
    std::int64_t kv = 0;
  };
  struct Parked {
    ReserveRequest r;
    bool refused = false;  // refused at least once
  };

  void run() {
    std::vector<ReserveRequest> submitted;
    std::vector<Tracked> tracked;
    std::vector<std::uint64_t> released;
    auto next_tick = SteadyClock::now();
    std::unique_lock lock(mu_);
    while (!stop_) {
      auto until = next_tick;
      if (!parked_.empty()) until = std::min(until, SteadyClock::now() + kParkedRetry);
      wake_.wait_until(lock, until, [this] {
        return stop_ || !submitted_.empty() || !tracked_.empty() || !released_.empty();
      });
      if (stop_) break;
      submitted.swap(submitted_);
      tracked.swap(tracked_);
      released.swap(released_);
      lock.unlock();
      const auto now = SteadyClock::now();
      const bool tick = now >= next_tick;
      if (tick) next_tick = now + interval_;
      busy_since_.store(nowNs(), std::memory_order_release);
      cycle(tick, submitted, tracked, released);
      busy_since_.store(0, std::memory_order_release);
      submitted.clear();
      tracked.clear();
      released.clear();
      lock.lock();
    }
  }

  void cycle(bool tick, std::vector<ReserveRequest>& submitted, const std::vector<Tracked>& tracked,
             const std::vector<std::uint64_t>& released) {
    for (const Tracked& t : tracked) live_[t.id] = {t.endpoint, t.kv};
    // The releases go out, and are answered, before any booking: a slot this replica frees is
    // open to the other replicas' bookings, not only to its own parked requests
    // (docs/design/replicas-redis.md, "Release").
    std::size_t pending = 0;
    for (const std::uint64_t id : released) {
      const auto it = live_.find(id);
      if (it == live_.end()) continue;
      if (conn_) {
        store_.appendRelease(*conn_, urls_[it->second.endpoint], id);
        ++pending;
      }
      live_.erase(it);
    }
    if (pending > 0 && !store_.readReleases(*conn_, pending)) fail(store_.error());
    for (ReserveRequest& r : submitted) {
      Parked p{std::move(r), false};
      // Priority descending, then enqueue time: after every entry that goes before it.
      const auto at =
          std::upper_bound(parked_.begin(), parked_.end(), p, [](const Parked& a, const Parked& b) {
            if (a.r.priority != b.r.priority) return a.r.priority > b.r.priority;
            return a.r.enqueueTime < b.r.enqueueTime;
          });
      parked_.insert(at, std::move(p));
    }
    if (tick && !conn_) connect();  // re-asserts before any booking
    dropEnded();
    if (conn_) serveParked();
    if (tick && conn_ && !reassert()) fail(store_.error());  // after the bookings: off their path
    if (!conn_) deliverUnbooked();
    c_.parked.store(static_cast<std::int64_t>(parked_.size()), std::memory_order_relaxed);
    c_.live.store(static_cast<std::int64_t>(live_.size()), std::memory_order_relaxed);
  }

  void connect() {
    std::string error;
    conn_ = RedisConnection::open(url_, timeout_ms_, 3 + kMaxBatch, error);
    if (!conn_) {
      fail(error);
      return;
    }
    if (!store_.load(*conn_) || !reassert()) {
      fail(store_.error());
      return;
    }
    active_.store(true, std::memory_order_release);
    c_.active.store(1, std::memory_order_relaxed);
    if (!said_active_) {
      std::fprintf(stderr,
                   "holdback-gateway: replica reserve: redis %s: bookings in force (%zu live "
                   "dispatches re-asserted)\n",
                   describe_.c_str(), live_.size());
      std::fflush(stderr);
      said_active_ = true;
      said_failing_ = false;
    }
  }

  bool reassert() {
    std::vector<std::vector<std::pair<std::uint64_t, std::int64_t>>> live(urls_.size());
    for (const auto& [id, l] : live_) live[l.endpoint].emplace_back(id, l.kv);
    return store_.reassert(*conn_, urls_, live);
  }

  void fail(const std::string& why) {
    conn_.reset();
    active_.store(false, std::memory_order_release);
    c_.active.store(0, std::memory_order_relaxed);
    c_.failures.fetch_add(1, std::memory_order_relaxed);
    if (!said_failing_) {
      std::fprintf(stderr,
                   "holdback-gateway: replica reserve: redis %s failed (%s): dispatching on the "
                   "local 1/R share until it answers\n",
                   describe_.c_str(), why.c_str());
      std::fflush(stderr);
      said_failing_ = true;
      said_active_ = false;
    }
  }

  // Parked requests whose client hung up or whose TTL ran out: their one outcome.
  void dropEnded() {
    const TimePoint now = Clock::now();
    for (auto it = parked_.begin(); it != parked_.end();) {
      ReserveRequest& r = it->r;
      if (r.sink->abandoned.load(std::memory_order_acquire)) {
        // The client is gone: its coroutine ends the lease (dispatched, no endpoint).
        c_.parkedAbandoned.fetch_add(1, std::memory_order_relaxed);
        r.sink->deliver(r.outcome, std::nullopt, now - r.enqueueTime);
      } else if (r.deadline && now >= *r.deadline) {
        c_.parkedExpired.fetch_add(1, std::memory_order_relaxed);
        gw_.endLease(r.id);  // the one release of its lease: the sink sees no dispatch
        r.sink->deliver({QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired}, std::nullopt,
                        now - r.enqueueTime);
      } else {
        ++it;
        continue;
      }
      it = parked_.erase(it);  // its pick's ledger handle is released here
    }
  }

  // Appends the candidates for `r` to cands_ and their endpoints to order_: its pick first, then
  // the other usable endpoints by requests in flight per slot (fewest first). Returns how many.
  std::size_t candidates(const ReserveRequest& r) {
    const std::size_t first = order_.size();
    order_.push_back(r.dispatch.endpoint);
    for (std::size_t i = 0; i < urls_.size(); ++i) {
      if (i != r.dispatch.endpoint && gw_.pool().up(i)) order_.push_back(i);
    }
    const auto load = [this](std::size_t i) {
      const std::int64_t slots = std::max<std::int64_t>(1, gw_.pool().capacity(i).slots);
      return static_cast<double>(gw_.pool().inFlight(i)) / static_cast<double>(slots);
    };
    std::stable_sort(order_.begin() + static_cast<std::ptrdiff_t>(first) + 1, order_.end(),
                     [&](std::size_t a, std::size_t b) { return load(a) < load(b); });
    for (std::size_t j = first; j < order_.size(); ++j) {
      const std::size_t i = order_[j];
      const LearnedCapacity cap = gw_.pool().capacity(i);
      const Pool::ScrapedUse use = gw_.pool().scraped(i);
      ReserveCandidate k;
      k.url = urls_[i];
      k.scrapedSlots = static_cast<std::int64_t>(std::llround(std::max(0.0, use.slotsInUse)));
      k.kvCapacity = std::max<std::int64_t>(0, cap.kvCapacityTokens);
      k.scrapedKv = static_cast<std::int64_t>(
          std::llround(std::clamp(use.kvCacheUsage, 0.0, 1.0) * static_cast<double>(k.kvCapacity)));
      k.slots = std::max<std::int64_t>(0, cap.bookingSlots);  // 0: unknown, not checked
      cands_.push_back(k);
    }
    return order_.size() - first;
  }

  // Books parked requests in order, up to kMaxBatch per script call (requests that arrived
  // together cost one round trip), until one is refused everywhere.
  void serveParked() {
    while (!parked_.empty() && conn_) {
      const std::size_t m = std::min(parked_.size(), kMaxBatch);
      order_.clear();
      cands_.clear();
      batch_.clear();
      // At most urls_.size() candidates a request: cands_ does not move, so the spans hold.
      cands_.reserve(m * urls_.size());
      for (std::size_t j = 0; j < m; ++j) {
        const ReserveRequest& r = parked_[j].r;
        const std::size_t at = cands_.size();
        const std::size_t n = candidates(r);
        batch_.push_back({r.id, r.kvTokens, r.keepFree,
                          std::span<const ReserveCandidate>(cands_).subspan(at, n)});
      }
      std::optional<ReserveBatchResult> res =
          store_.bookBatch(*conn_, std::span<const ReserveBatchItem>(batch_));
      if (res && res->heartbeatGone) {  // lapsed (stalled past the lease): re-assert, once more
        c_.lapses.fetch_add(1, std::memory_order_relaxed);
        res = reassert() ? store_.bookBatch(*conn_, std::span<const ReserveBatchItem>(batch_))
                         : std::nullopt;
      }
      if (!res || res->heartbeatGone) {
        fail(store_.error().empty() ? "own heartbeat gone after re-assertion" : store_.error());
        return;
      }
      if (res->bad > 0) {
        c_.badEntries.fetch_add(static_cast<std::uint64_t>(res->bad), std::memory_order_relaxed);
        log_.reject(RejectReason::kMalformed,
                    "booking entries under " + printable(store_.bookingsKey("")),
                    std::to_string(res->bad) + " entries");
      }
      if (res->expired > 0) {
        c_.expiredBookings.fetch_add(static_cast<std::uint64_t>(res->expired),
                                     std::memory_order_relaxed);
      }
      // Each request's endpoints start where the previous one's end (the order candidates() made).
      std::size_t first = 0;
      for (std::size_t j = 0; j < res->booked.size(); ++j) {
        const int booked = res->booked[j];
        Parked& p = parked_.front();
        if (booked < 0) {
          c_.refusals.fetch_add(1, std::memory_order_relaxed);
          p.refused = true;
          return;
        }
        const std::size_t endpoint = order_[first + static_cast<std::size_t>(booked)];
        first += batch_[j].candidates.size();
        if (!p.refused) {  // what the booking added to this dispatch
          c_.observe(std::chrono::duration<double>(SteadyClock::now() - p.r.submitted).count());
        }
        c_.bookings.fetch_add(1, std::memory_order_relaxed);
        deliver(std::move(p.r), endpoint);
        parked_.pop_front();
      }
    }
  }

  // Inactive (Redis failing): the local 1/R share. In the parked order, a top-band request goes
  // out on its pick at once, one of a band below while this replica's live dispatches are under
  // fallbackShare(); the rest wait for Redis (then booked), this replica's releases, their TTL
  // or their client.
  void deliverUnbooked() {
    const std::int64_t slots = poolSlots();
    const std::int64_t replicas =
        gw_.counters().replicaSyncReplicas.load(std::memory_order_relaxed);
    while (!parked_.empty()) {
      const ReserveRequest& r = parked_.front().r;
      const std::int64_t share = fallbackShare(slots, r.keepFree, replicas);
      if (!r.top && share >= 0 && static_cast<std::int64_t>(live_.size()) >= share) return;
      c_.fallbackDispatches.fetch_add(1, std::memory_order_relaxed);
      const std::size_t endpoint = r.dispatch.endpoint;
      deliver(std::move(parked_.front().r), endpoint);
      parked_.pop_front();
    }
  }

  // The slots the servers that are up count (Pool's booking slots), summed; 0 when one's is
  // unknown.
  std::int64_t poolSlots() const {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < urls_.size(); ++i) {
      if (!gw_.pool().up(i)) continue;
      const std::int64_t slots = gw_.pool().capacity(i).bookingSlots;
      if (slots <= 0) return 0;
      sum += slots;
    }
    return sum;
  }

  void deliver(ReserveRequest r, std::size_t endpoint) {
    Pool::Dispatch d = std::move(r.dispatch);
    if (endpoint != d.endpoint) {  // booked elsewhere: the ledger's handle and the lease move
      Pool::Dispatch moved = gw_.pool().dispatchTo(endpoint, r.kvTokens, r.priority);
      d.release();
      d = std::move(moved);
      if (gw_.evictionEnabled()) (void)gw_.controller().ticket(r.id).setEndpoint(endpoint);
    }
    d.booking = Pool::Dispatch::BookingRelease(this, r.id);
    live_[r.id] = {endpoint, r.kvTokens};
    if (gw_.evictionEnabled()) (void)gw_.controller().ticket(r.id).setParked(false);  // sent
    r.sink->deliver(r.outcome, std::move(d), Clock::now() - r.enqueueTime);
  }

  RedisUrl url_;
  std::string describe_;
  std::vector<std::string> urls_;
  Gateway& gw_;
  ReserveCounters& c_;
  ReservationStore store_;
  std::chrono::milliseconds interval_;
  int timeout_ms_;
  ReplicaInputLog log_;
  std::atomic<bool> active_{false};
  std::atomic<std::int64_t> busy_since_{0};  // steady ns the running cycle began; 0: waiting

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;                      // guarded by mu_
  std::vector<ReserveRequest> submitted_;  // guarded by mu_
  std::vector<Tracked> tracked_;           // guarded by mu_
  std::vector<std::uint64_t> released_;    // guarded by mu_

  // The thread's own.
  std::unique_ptr<RedisConnection> conn_;
  std::deque<Parked> parked_;
  std::unordered_map<std::uint64_t, Live> live_;
  std::vector<std::size_t> order_;
  std::vector<ReserveCandidate> cands_;
  std::vector<ReserveBatchItem> batch_;
  bool said_active_ = false;
  bool said_failing_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<ReplicaReserver> startReplicaReserver(const RedisStore& redis,
                                                      std::vector<std::string> endpointUrls,
                                                      Gateway& gateway, int intervalMs,
                                                      int leaseMs) {
  return std::make_unique<RedisReserver>(redis, std::move(endpointUrls), gateway, intervalMs,
                                         leaseMs);
}

}  // namespace holdback::gateway
