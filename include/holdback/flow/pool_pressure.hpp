// The pool's pressure, sampled outside every controller lock.
//
// A dispatch decision needs two facts about the pool: whether it is empty (the expiry regime of
// the Go reference's regime-aware TTL sweep, llm-d-router PR #2284,
// https://github.com/llm-d/llm-d-router) and how saturated it is (stage-aware, PR #2221). Both come
// from host code: the EndpointSource and the SaturationDetector. PoolPressureSampler calls them and
// returns the facts as a value, PoolPressure, which FlowController::dispatch(now, pressure) and
// expire(now, pressure) then apply under the controller's lock. FlowController::dispatchCycle(now)
// is exactly `dispatch(now, sampler.sample(now))`. Hosts and the simulator may skip the sampler
// and feed a PoolPressure they computed themselves.
//
// Locking
//   The sampler has its own mutex, held while the endpoint source and the detector run (they are
//   called from one thread at a time, as EndpointSource promises) and guarding the evaluator's
//   scratch buffers. No controller lock is ever held while it runs, so shutdown, reconfigure,
//   enqueue, cancel and stats never wait for host code. A source or detector that calls back into
//   the same controller on the same thread (dispatchCycle, expire) is detected: the nested call
//   does not sample again (it would recurse into the host) and uses the last pressure instead.
//   The detector is swapped by setDetector() under a second small mutex, never waiting on a
//   sample in progress; the next sample picks it up.
//
// Room past the KV threshold across replicas
//   A detector whose KV room stops at a threshold may let a lower band's request start below it
//   and run past it (EndpointRoom::kvCapacityLeft; the utilization detector's
//   kvStartPastThreshold). One gateway's ledger then shows the endpoint past the threshold at
//   once, and no second request starts there. Replicas each see the others' dispatches a feed
//   delay later or a sync interval later, and could each start one past the threshold on the
//   same endpoint. So with several replicas (setPastThreshold, which the controller calls from
//   ReplicaPort::setShare):
//     kTurn  (a share of R >= 2 replicas on the replica feed) a replica keeps an endpoint's room
//            past the threshold only on its turn there (ReplicaTurn::hasTurn: the turn moves
//            every 100 ms on a clock the replicas share), so that one replica at a
//            time may start a request past the threshold on each endpoint and every replica
//            gets the turn on each endpoint in turn;
//     kNone  (a share of R >= 2 replicas without the feed, or no share after one: the store
//            failed) no replica starts a request past the threshold: every request's footprint
//            must fit below it;
//     kDetector  (the default: one gateway, or a share of one replica) the detector's room as
//            it is.
//   docs/results/replicas.md measures the replicas with the turn.
//
// Thread safety: thread-safe.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "holdback/core/capacity.hpp"
#include "holdback/core/endpoint.hpp"
#include "holdback/core/replica_share.hpp"
#include "holdback/core/thread_annotations.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/detector/stage_saturation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// EndpointSource (where the controller reads the pool from) is in holdback/core/endpoint.hpp; it
// is called outside every controller lock and may call any FlowController method ("Locking").

// A band's room in one sample (see PoolPressure::room).
struct BandRoomEntry {
  Priority priority = 0;
  BandRoom room;
};

// What the controller declares per band for the room computation: the KV footprint of the
// requests the band's holdback protects (those of the bands above it) and of its own requests.
struct BandFootprint {
  Priority priority = 0;
  double protectedTokens = 0.0;
  double ownTokens = 0.0;
};

// One sample of the pool: emptiness, stage-aware saturation and the bands' room.
struct PoolPressure {
  static constexpr std::size_t kMaxRoomBands = 16;
  // The endpoint source returned no endpoint (the no-endpoint expiry regime).
  bool poolEmpty = false;
  // The largest KV capacity of one endpoint of the pool (Endpoint::kvCapacityTokens), when every
  // endpoint's is known; 0 when some endpoint's is unknown (<= 0) or the pool is empty. A request
  // whose KV footprint exceeds it can never start: the controller rejects it (kTooLarge).
  std::int64_t largestKvCapacityTokens = 0;
  // Stage-aware saturation (StageSaturationEvaluator). effective is what the policy sees.
  StageSaturation saturation;
  // The pool's size and, when the effective saturation reads >= 1.0 (saturated: the only case
  // where staleness alone can gate every band), how many endpoints the detector found stale
  // (SaturationDetector::staleEndpoints); 0 otherwise, the count then being skipped.
  std::size_t endpoints = 0;
  std::size_t staleEndpoints = 0;
  // For the first roomBands bands the controller declared footprints for
  // (PoolPressureSampler::setFootprints), the room of the whole pool for its protected requests
  // (holdback/core/capacity.hpp, from SaturationDetector::room). roomBands = 0 when the detector
  // has no capacity model or nothing was declared: a demand-aware policy then sees no room.
  std::array<BandRoomEntry, kMaxRoomBands> room{};
  std::size_t roomBands = 0;
};

namespace detail {

// A PoolPressure as the controller's own dispatch cycle takes it from its sampler: the same
// figures, but only the first roomBands room entries are ever written (a PoolPressure constructs
// all kMaxRoomBands of them, which a cycle on a pool without room need not pay for).
struct PressureSample {
  struct Room {
    Priority priority;
    double fits;
    double fitsAfter;
  };
  bool poolEmpty = false;
  std::int64_t largestKvCapacityTokens = 0;
  StageSaturation saturation;
  std::size_t endpoints = 0;
  std::size_t staleEndpoints = 0;
  std::size_t roomBands = 0;
  std::array<Room, PoolPressure::kMaxRoomBands> room;  // [0, roomBands) only

  [[nodiscard]] static PressureSample of(const PoolPressure& p) noexcept {
    PressureSample s;
    s.poolEmpty = p.poolEmpty;
    s.largestKvCapacityTokens = p.largestKvCapacityTokens;
    s.saturation = p.saturation;
    s.endpoints = p.endpoints;
    s.staleEndpoints = p.staleEndpoints;
    s.roomBands = p.roomBands < p.room.size() ? p.roomBands : p.room.size();
    for (std::size_t i = 0; i < s.roomBands; ++i) {
      s.room[i] = {p.room[i].priority, p.room[i].room.fits, p.room[i].room.fitsAfter};
    }
    return s;
  }
  [[nodiscard]] PoolPressure pressure() const noexcept {
    PoolPressure p;
    p.poolEmpty = poolEmpty;
    p.largestKvCapacityTokens = largestKvCapacityTokens;
    p.saturation = saturation;
    p.endpoints = endpoints;
    p.staleEndpoints = staleEndpoints;
    p.roomBands = roomBands;
    for (std::size_t i = 0; i < roomBands; ++i) {
      p.room[i].priority = room[i].priority;
      p.room[i].room = BandRoom{room[i].fits, room[i].fitsAfter};
    }
    return p;
  }
};

}  // namespace detail

// PoolPressure::largestKvCapacityTokens of `pool`: the largest Endpoint::kvCapacityTokens, or 0
// when some endpoint's is unknown (<= 0) or the pool is empty. O(n), no allocation.
[[nodiscard]] HOLDBACK_API std::int64_t largestKvCapacity(std::span<const Endpoint> pool) noexcept;

// Calls the host's endpoint source and detector outside every controller lock.
// Thread safety: thread-safe (see the file comment).
class HOLDBACK_API PoolPressureSampler {
 public:
  PoolPressureSampler(std::shared_ptr<EndpointSource> endpoints,
                      std::shared_ptr<const SaturationDetector> detector);
  PoolPressureSampler(const PoolPressureSampler&) = delete;
  PoolPressureSampler& operator=(const PoolPressureSampler&) = delete;

  // Emptiness and saturation of the pool at `now`. nullopt when called from inside this
  // sampler's own endpoint source or detector on the same thread (not re-entrant).
  [[nodiscard]] std::optional<PoolPressure> sample(TimePoint now) noexcept
      HOLDBACK_EXCLUDES(sample_mu_, detector_mu_);
  // Emptiness and the largest KV capacity only (the detector is not called; saturation is left
  // at its default).
  [[nodiscard]] std::optional<PoolPressure> samplePool(TimePoint now) noexcept
      HOLDBACK_EXCLUDES(sample_mu_, detector_mu_);

  // sample() (`with_saturation`) or samplePool() into `out`, built without a PoolPressure (the
  // controller's own cycle); false, `out` untouched, when re-entrant.
  HOLDBACK_LOCAL bool sampleInto(TimePoint now, bool with_saturation,
                                 detail::PressureSample& out) noexcept
      HOLDBACK_EXCLUDES(sample_mu_, detector_mu_);

  // The detector of later samples (hot reload). Never waits for a sample in progress.
  void setDetector(std::shared_ptr<const SaturationDetector> detector) noexcept
      HOLDBACK_EXCLUDES(detector_mu_);

  // The bands whose room later samples compute (at most PoolPressure::kMaxRoomBands, the first
  // ones; a footprint <= 0 or NaN needs no KV). Lock-free (atomics): the controller calls it
  // under its own lock. A sample racing with a call may mix old and new entries for one sample.
  void setFootprints(std::span<const BandFootprint> bands) noexcept;

  // Per-endpoint room for the controller's restoration per endpoint (flow/eviction.hpp): while
  // on, every sample() also calls the detector's room() and keeps its result (one entry per
  // endpoint of the source's list, in its order). Lock-free.
  void keepEndpointRoom(bool on) noexcept { keep_room_.store(on, std::memory_order_relaxed); }
  // Copies the room per endpoint kept by the last sample into `out` and, into `waits`, 1 for
  // each endpoint where a request waits (resized to the pool: they allocate only while the pool
  // grows); false, leaving both empty, when none is kept (off, no sample yet, an empty pool, or
  // a detector without a capacity model). The kept room is the detector's, except that a
  // resource it does not count (+infinity) is the endpoint's capacity less the gateway's
  // in-flight count when both are known (Endpoint::kvCapacityTokens - inFlightTokens,
  // maxRunningRequests - inFlightRequests, floored at 0). An endpoint waits when its scraped
  // waitingQueueSize is >= 0.5 or the gateway's in-flight requests or tokens exceed its known
  // capacity. Takes only a small mutex that is never held while host code runs: callable under
  // the controller's lock.
  // Whether the last kept sample had an endpoint where a request waits (lock-free).
  [[nodiscard]] bool endpointWaits() const noexcept {
    return kept_waits_any_.load(std::memory_order_relaxed);
  }
  bool copyEndpointRoom(std::vector<EndpointRoom>& out,
                        std::vector<std::uint8_t>& waits) const noexcept
      HOLDBACK_EXCLUDES(room_mu_);

  // Room past the KV threshold across replicas (see the file comment): kDetector (the default),
  // kNone, or kTurn by `turn` (two replicas or more; else as kDetector). Applies to later
  // samples' room, the bands' and the kept one. Lock-free (atomics): a sample racing with a call
  // may mix old and new values.
  enum class PastThreshold : std::uint8_t { kDetector, kNone, kTurn };
  void setPastThreshold(PastThreshold mode, const ReplicaTurn& turn = {}) noexcept {
    past_rank_.store(turn.rank, std::memory_order_relaxed);
    past_replicas_.store(turn.replicas, std::memory_order_relaxed);
    past_offset_.store(turn.clockOffset.count(), std::memory_order_relaxed);
    past_mode_.store(mode, std::memory_order_relaxed);
  }

 private:
  // Applies setPastThreshold to the detector's room of `pool`.
  void limitPastThreshold(std::span<const Endpoint> pool, std::span<EndpointRoom> room,
                          TimePoint now) const noexcept;
  // Replaces the kept per-endpoint room (keepEndpointRoom); false when it is empty or could not
  // be kept.
  bool keepRoom(std::span<const Endpoint> pool, std::span<const EndpointRoom> room) noexcept
      HOLDBACK_EXCLUDES(room_mu_);

  const std::shared_ptr<EndpointSource> endpoints_;

  Mutex detector_mu_;  // never held while host code runs
  std::shared_ptr<const SaturationDetector> next_detector_ HOLDBACK_GUARDED_BY(detector_mu_);
  std::atomic<bool> detector_changed_{false};

  Mutex sample_mu_ HOLDBACK_ACQUIRED_BEFORE(detector_mu_);
  std::shared_ptr<const SaturationDetector> detector_ HOLDBACK_GUARDED_BY(sample_mu_);
  StageSaturationEvaluator evaluator_ HOLDBACK_GUARDED_BY(sample_mu_);
  // The detector's per-endpoint room (grows with the pool only).
  std::vector<EndpointRoom> room_scratch_ HOLDBACK_GUARDED_BY(sample_mu_);

  struct FootprintSlot {
    std::atomic<Priority> priority{0};
    std::atomic<double> protectedTokens{0.0};
    std::atomic<double> ownTokens{0.0};
  };
  std::array<FootprintSlot, PoolPressure::kMaxRoomBands> footprints_{};
  std::atomic<std::size_t> footprint_count_{0};
  // keepEndpointRoom: the last sample's room per endpoint (grows with the pool only).
  std::atomic<bool> keep_room_{false};
  mutable Mutex room_mu_;  // never held while host code runs
  std::vector<EndpointRoom> kept_room_ HOLDBACK_GUARDED_BY(room_mu_);
  std::vector<std::uint8_t> kept_waits_ HOLDBACK_GUARDED_BY(room_mu_);
  std::atomic<bool> kept_waits_any_{false};
  std::atomic<PastThreshold> past_mode_{PastThreshold::kDetector};
  std::atomic<std::int64_t> past_rank_{0};
  std::atomic<std::int64_t> past_replicas_{1};
  std::atomic<std::int64_t> past_offset_{0};  // Duration::rep
  // The thread inside sample(), to detect a re-entrant call from the host's code.
  std::atomic<std::thread::id> owner_{};
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/pool_pressure-inl.hpp"
#endif
