// detail::ReplicaCoordinator: one flow controller's coordination with the other gateway replicas
// of its pool. Internal.
//
// What it holds
//   - the share the host installs every sync round (ReplicaPort::setShare: the other
//     live replicas' figures summed, the live count, this replica's rank, the shared clock);
//   - the figures this replica publishes for them (ReplicaPort::restoreFigures):
//     restoration writes its part through the evictor's cycle, the controller adds its heads;
//   - the turn (ReplicaTurn, core/replica_share.hpp): the one rule of which replica takes a
//     remainder or has the turn, stepping every 100 ms on the replicas' shared clock.
//
// What reads it
//   - the evictor, through a const pointer in its cycle: the pool's figures (others()) and this
//     replica's part of the pool's revocations (restorationPart, ownAmongPoolYoungest);
//   - the dispatch cycle: the yield rule (yieldsTo) and the pool's turnover (poolCompletionRate);
//   - the pool-pressure sampler: the rule for room past the KV threshold, set on each install
//     (install's PastThresholdSetting, PoolPressureSampler::setPastThreshold);
//   - the ledger's free room split reads the same ReplicaTurn: the ReplicaSyncer installs the
//     rank, the live count and the clock offset into the DispatchLedger in the round that makes
//     the share (the ledger belongs to the host and is filled on the host's calls, on the
//     scrape's time, so that every replica reading a scrape of about the same time splits it
//     alike).
//
// Cost: O(1) per call but ownAmongPoolYoungest (O(need)); no allocation.
//
// Thread safety: thread-compatible; the owner (ControllerCore) calls it only under its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "holdback/core/replica_share.hpp"
#include "holdback/core/types.hpp"
#include "holdback/flow/pool_pressure.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class ReplicaCoordinator {
 public:
  // The sampler's rule for room past the KV threshold (pool_pressure.hpp) after an install.
  struct PastThresholdSetting {
    PoolPressureSampler::PastThreshold mode = PoolPressureSampler::PastThreshold::kDetector;
    ReplicaTurn turn;
  };
  // Installs the share of a sync round (std::nullopt: the round failed, or no store). A share
  // with fewer than two replicas or a rank outside [0, replicas) counts as none for the splits;
  // the sampler's rule: kTurn on the feed (pooledArrivals) with two replicas or more, kNone
  // without it or once the share is gone after several replicas shared (the store failed),
  // else the detector's room.
  PastThresholdSetting install(const std::optional<ReplicaShare>& share) noexcept;

  // How many shares were installed (each sync round's, failed ones included).
  [[nodiscard]] std::uint64_t installs() const noexcept { return installs_; }
  // The installed share; null when this replica decides alone.
  [[nodiscard]] const ReplicaShare* share() const noexcept { return share_ ? &*share_ : nullptr; }
  [[nodiscard]] bool shared() const noexcept { return share_.has_value(); }
  // A figure of the others': finite and > 0, else 0; 0 alone.
  [[nodiscard]] double others(double ReplicaRestoreFigures::*figure) const noexcept {
    return share_ ? finiteOrZero(share_->others.*figure) : 0.0;
  }
  // Whether the replicas' demand estimates count the pool's arrivals (the replica feed).
  [[nodiscard]] bool pooledArrivals() const noexcept { return share_ && share_->pooledArrivals; }

  // This replica's part of the pool's `need` revocations at `now`: need / R, plus one of the
  // remainder on its turn (ReplicaTurn::part, pool-wide); `need` alone.
  [[nodiscard]] std::size_t restorationPart(std::size_t need, TimePoint now) const noexcept;
  // Every replica counts the pool's arrivals and every other live one publishes its youngest
  // victims: the pool's youngest can be told apart, and each replica revokes its own among them.
  [[nodiscard]] bool poolVictims() const noexcept;
  // Of the pool's `need` youngest victims (this replica's `mine` candidates, youngest first,
  // dispatched at dispatchedAt(i), and the others' published times; a tie counts as this
  // replica's), how many are this replica's (they are its first ones). `skipOthers`: the others'
  // first (youngest) victims left out, as not there.
  template <class DispatchedAt>
  [[nodiscard]] std::size_t ownAmongPoolYoungest(std::size_t mine, DispatchedAt dispatchedAt,
                                                 std::size_t need,
                                                 std::size_t skipOthers = 0) const noexcept {
    const ReplicaRestoreFigures* theirs = share_ ? &share_->others : nullptr;
    const std::size_t published = theirs != nullptr ? theirs->victimsUsed() : 0;
    std::size_t own = 0;
    std::size_t j = skipOthers < published ? skipOthers : published;
    for (std::size_t k = 0; k < need && own < mine; ++k) {
      const double at = ReplicaRestoreFigures::secondsOf(dispatchedAt(own));
      if (j < published && ReplicaRestoreFigures::sane(theirs->victimDispatchTimes[j]) > at) {
        ++j;  // another replica's, younger
      } else {
        ++own;
      }
    }
    return own;
  }

  // The yield rule (pool-wide oldest first, on the feed only): this replica leaves a dispatch
  // from band `priority`, whose head was enqueued at `headEnqueued`, to another replica whose
  // published head of the same band waited longer by more than the share's headTolerance.
  // Without the feed the ledger's free room split gives each replica its part of a scrape's
  // room, and a part left to another replica would idle until the next scrape.
  [[nodiscard]] bool yieldsTo(Priority priority, TimePoint headEnqueued) const noexcept;
  // The pool's completions per second per replica, for the policies (DemandView::completionRate):
  // this replica's `own` plus the others', divided by the replicas (not with pooled arrivals:
  // each replica's demand then counts the pool's). Nothing alone.
  [[nodiscard]] std::optional<double> poolCompletionRate(double own) const noexcept;

  // The figures this replica publishes (restoration writes its part each decision).
  [[nodiscard]] ReplicaRestoreFigures& published() noexcept { return published_; }
  [[nodiscard]] const ReplicaRestoreFigures& published() const noexcept { return published_; }

  // A figure another replica reported: itself when finite and > 0, else 0.
  [[nodiscard]] static double finiteOrZero(double x) noexcept;

 private:
  std::optional<ReplicaShare> share_;
  ReplicaRestoreFigures published_;
  // A share of two replicas or more was installed last: a missing share then means the store
  // failed, not one gateway.
  bool had_replicas_ = false;
  std::uint64_t installs_ = 0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
