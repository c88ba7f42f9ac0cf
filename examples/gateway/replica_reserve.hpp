// --replica-mode reserve (with --replica-sync redis://...): every dispatch books its footprint
// (one slot and its KV tokens) on its endpoint in Redis, atomically, before it goes to the server;
// its completion, cancellation or revocation releases the booking. The protocol, the Redis keys
// and the failure handling are in docs/design/replicas-redis.md; the Redis side is
// replica_reserve_redis.hpp, the script client replica_reserve_store.hpp.
//
// The gateway's side (gateway.cpp onOutcome): a request the controller dispatched takes its pick
// (Pool::pick: the ledger's handle, so that the next dispatch decision counts it) and is handed to
// the reserver with submit(); the reserver's thread books it (on the pick's endpoint, else on the
// others best first), moves its ledger handle when it booked elsewhere, and delivers it. Refused
// everywhere, it is parked (the controller's lease stays, the client waits) until a booking
// succeeds, its TTL runs out or its client hangs up. A top-band request is not submitted while
// the reserver's calls have stalled past kTopBandPatience: it goes out on its pick at once,
// track()ed. While Redis fails the reserver is inactive
// and the replica keeps to its local 1/R share: onOutcome delivers a top-band pick at once, and a
// request of a band below waits on the reserver's thread until this replica's live dispatches are
// under fallbackShare() (parked requests likewise: the table refused them a moment ago); each is
// track()ed, so that the replica's bookings are re-asserted whole when Redis answers again.
//
// Thread safety: ReplicaReserver's members are thread-safe; ReserveCounters are atomics.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "holdback/flow/flow_controller.hpp"
#include "pool.hpp"

namespace holdback::gateway {

class OutcomeSink;  // gateway.hpp

// Where a Dispatch's booking is released (Pool::Dispatch::BookingRelease).
class ReservationSink {
 public:
  // Booking `booking` ended (completed, cancelled or revoked): release it. Never blocks on Redis.
  virtual void released(std::uint64_t booking) noexcept = 0;

 protected:
  ~ReservationSink() = default;
};

// /metrics (holdback_gateway_replica_reserve_*).
struct ReserveCounters {
  // The booking round trip's histogram buckets (upper bounds, seconds; the last is +Inf).
  static constexpr std::array<double, 10> kBuckets{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                   0.005,  0.01,    0.025,  0.05,  0.1};
  std::atomic<std::int64_t> active{0};  // 1: bookings in force; 0: the local share (fallback)
  std::atomic<std::uint64_t> bookings{0};
  std::atomic<std::uint64_t> refusals{0};  // booking calls that found no endpoint with room
  std::atomic<std::uint64_t> fallbackDispatches{0};  // dispatched without a booking (Redis down)
  std::atomic<std::int64_t> parked{0};
  std::atomic<std::uint64_t> parkedExpired{0};    // ended parked by their TTL
  std::atomic<std::uint64_t> parkedAbandoned{0};  // ended parked: the client hung up
  std::atomic<std::int64_t> live{0};              // this replica's live bookings
  std::atomic<std::uint64_t> expiredBookings{0};  // others' bookings dropped: heartbeat gone
  std::atomic<std::uint64_t> failures{0};         // Redis calls that failed
  // Bookings that found this replica's own heartbeat expired (it stalled past the lease, so the
  // others had stopped counting its bookings): it re-asserted them and booked again.
  std::atomic<std::uint64_t> lapses{0};
  std::atomic<std::uint64_t> badEntries{0};  // booking entries ignored (replica_input.hpp)
  std::array<std::atomic<std::uint64_t>, kBuckets.size() + 1> latency{};  // not cumulative
  std::atomic<std::uint64_t> latencyCount{0};
  std::atomic<double> latencySum{0.0};

  void observe(double seconds) noexcept {
    std::size_t b = 0;
    while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
    latency[b].fetch_add(1, std::memory_order_relaxed);
    latencyCount.fetch_add(1, std::memory_order_relaxed);
    double s = latencySum.load(std::memory_order_relaxed);
    while (!latencySum.compare_exchange_weak(s, s + seconds, std::memory_order_relaxed)) {
    }
  }
};

// A request the controller dispatched, on its way to a booking.
struct ReserveRequest {
  RequestId id = 0;
  std::shared_ptr<OutcomeSink> sink;
  Outcome outcome;
  Priority priority = 0;  // the parked order: priority descending, then enqueue time
  TimePoint enqueueTime{};
  std::optional<TimePoint> deadline;  // its TTL's end (none: no TTL)
  std::int64_t kvTokens = 0;
  // Slots it must leave free over the pool (a band below the top: the reserve policy's fixed
  // reserve, replica_reserve_store.hpp); 0: none.
  std::int64_t keepFree = 0;
  bool top = false;  // the top band: while Redis fails, sent at once, never held for the share
  Pool::Dispatch dispatch;                            // the pick: its endpoint is tried first
  std::chrono::steady_clock::time_point submitted{};  // set by submit()
};

// How long a top-band request waits for the reserver's Redis calls before it goes out unbooked on
// its pick (tracked, and re-asserted with the next heartbeat), as one gateway sends it: a fifth of
// the shortest Redis timeout (redisTimeoutMs), about four times a booking's p99 on a loaded host.
inline constexpr std::chrono::milliseconds kTopBandPatience{10};

// While Redis fails: how many live dispatches (all bands) a replica may hold before it holds back
// requests of a band below the top: its 1/R share of the pool's slots (`poolSlots`, the servers'
// counted slots summed) less the pool's fixed reserve (`keep`), at least 1, with R the replicas
// the last sync round saw (at least 1); -1 (no bound) when a server's slot count is unknown
// (poolSlots <= 0). The shares of R replicas sum to at most the pool less its reserve, so a Redis
// stall does not fill the servers past their slots with dispatches the table would have refused.
[[nodiscard]] constexpr std::int64_t fallbackShare(std::int64_t poolSlots, std::int64_t keep,
                                                   std::int64_t replicas) noexcept {
  if (poolSlots <= 0) return -1;
  const std::int64_t r = replicas < 1 ? 1 : replicas;
  const std::int64_t share = (poolSlots - (keep < 0 ? 0 : keep)) / r;
  return share < 1 ? 1 : share;
}

class ReplicaReserver : public ReservationSink {
 public:
  virtual ~ReplicaReserver() = default;
  // Whether dispatches are booked now (false: Redis failing, the local share).
  [[nodiscard]] virtual bool active() const noexcept = 0;
  // Whether the reserver's thread has been in Redis calls for longer than a top-band request
  // waits for them (kTopBandPatience): a Redis stall the call's timeout has not yet declared.
  [[nodiscard]] virtual bool stalled() const noexcept = 0;
  // Books `r` on the reserver's thread and delivers it to its sink (or parks it). Never blocks on
  // Redis.
  virtual void submit(ReserveRequest r) = 0;
  // A dispatch made without a booking (inactive): counted as this replica's booking from now on
  // (sets d.booking) and written to Redis with the next re-assertion.
  virtual void track(Pool::Dispatch& d, RequestId id) = 0;
  // Stops the reserver's thread and drops the requests still parked (undelivered): call before
  // the I/O threads stop. released() stays callable until destruction.
  virtual void shutdown() noexcept = 0;
};

}  // namespace holdback::gateway
