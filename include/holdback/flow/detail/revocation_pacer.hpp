// detail::RevocationPacer: when eviction may decide and how many it revokes, and the revocations
// in flight (the Go reference's reclamation pacing). Internal.
//
// The algorithm
//   A revocation is outstanding from its issue until the host confirms its end (the release of
//   the revoked lease), or until confirmationTimeout has passed (then it counts as confirmed,
//   timed out, and its lease ends); then it cools for confirmationGrace (the time the sensor
//   needs to see the slot free); then its debit expires. Head-of-line reclaim is stop-and-wait:
//   it decides only while nothing is outstanding or cooling (gateOpen) and revokes
//   n = max(1, ceil(net / credit)) (headOfLineCount). Reserve restoration is pipelined: the
//   revocations outstanding or cooling are debited from its deficit (pendingCount). A
//   revocation's lead time is the configured one, else the measured mean issue-to-confirmation
//   latency plus the grace (leadSeconds).
//
// Invariants (hold between calls)
//   - outstanding_ holds the revocations issued and not yet ended (their leases are marked
//     revoked in the owner's LeaseTable); cooling_ the ended ones within their grace.
//   - pending_reclaim_ is the sum of their credits (up to rounding; 0 when both are empty).
//   - stats_ counts every lease start and end the owner reports and every revocation issued.
//
// Host code: none. The revocations of a decision go into a RevocationBatch on the caller's
// stack, which the owner hands to deliverRevocations() once its lock is released.
//
// Cost: O(outstanding + cooling) per call; reapLeases O(leases). Allocation: outstanding and
// cooling are reserved for one decision's cap at construction (stop-and-wait keeps them within
// it); the per-priority issue counts grow to the priorities revoked, then are kept.
//
// Thread safety: thread-compatible; the owner (ControllerCore) calls it only under its mutex.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/lease_table.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/stats.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The revocations of one cycle, on the stack (their evict callbacks run after the lock). Only
// the slots used are constructed: a cycle usually revokes nothing, and initializing all 32
// slots was a third of a dispatch cycle's own time.
class RevocationBatch {
 public:
  static_assert(std::is_trivially_destructible_v<Revocation>);
  RevocationBatch() noexcept {}  // NOLINT: the storage is deliberately left uninitialized
  RevocationBatch(const RevocationBatch&) = delete;
  RevocationBatch& operator=(const RevocationBatch&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool full() const noexcept { return size_ == kMaxRevocationsPerDecisionLimit; }
  Revocation& add() noexcept { return *::new (&storage_[size_++]) Revocation(); }
  [[nodiscard]] const Revocation& at(std::size_t i) const noexcept {
    return *std::launder(reinterpret_cast<const Revocation*>(&storage_[i]));
  }

 private:
  struct alignas(Revocation) Slot {
    unsigned char bytes[sizeof(Revocation)];
  };
  std::array<Slot, kMaxRevocationsPerDecisionLimit> storage_;
  std::size_t size_ = 0;
};

// Calls `evict` for each revocation of `batch`, in order; one that throws loses only its own
// call (that revocation stays outstanding and times out). Host code: call it with no library
// lock held.
void deliverRevocations(const RevocationBatch& batch,
                        const std::function<void(const Revocation&)>& evict) noexcept;

class RevocationPacer {
 public:
  // A revocation issued and not yet confirmed, and a confirmed one within its grace.
  struct Outstanding {
    RequestId id = 0;
    TimePoint issuedAt{};
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;  // the victim's
  };
  struct Cooling {
    TimePoint expiresAt{};
    double credit = 0.0;
    std::uint32_t endpoint = LeaseTable::kNoEndpoint;
  };

  // Reserves room for one decision's revocations.
  RevocationPacer();

  // Stop-and-wait: nothing outstanding or cooling.
  [[nodiscard]] bool gateOpen() const noexcept { return outstanding_.empty() && cooling_.empty(); }
  // The revocations outstanding or cooling, and the sum of their credits.
  [[nodiscard]] double pendingCount() const noexcept {
    return static_cast<double>(outstanding_.size() + cooling_.size());
  }
  [[nodiscard]] double pendingReclaim() const noexcept { return pending_reclaim_; }
  [[nodiscard]] std::span<const Outstanding> outstanding() const noexcept { return outstanding_; }
  [[nodiscard]] std::span<const Cooling> cooling() const noexcept { return cooling_; }
  // How many revocations cover `net` at `credit` each: at least one (upstream's sizing).
  [[nodiscard]] static std::size_t headOfLineCount(double net, double credit) noexcept;
  // A revocation's lead time in seconds: `configured` when > 0, else the measured mean
  // issue-to-confirmation latency (0 before the first) + `grace`.
  [[nodiscard]] double leadSeconds(Duration configured, Duration grace) const noexcept;

  // The owner recorded a lease.
  void leaseStarted() noexcept { stats_.leasesStarted += 1; }
  // The owner removed `lease` on the host's release: a revoked one confirms its revocation
  // (which starts cooling for options.confirmationGrace).
  void leaseReleased(const LeaseTable::Lease& lease, TimePoint now,
                     const EvictionOptions& options) noexcept;
  // Ends every lease of `leases` held `leaseTimeout` or longer (a revoked one: its revocation
  // timed out).
  void reapLeases(LeaseTable& leases, TimePoint now, Duration leaseTimeout,
                  const EvictionOptions& options) noexcept;
  // Retires timed-out outstanding revocations (their leases end) and expired cooling debits.
  void retire(TimePoint now, const EvictionOptions& options, LeaseTable& leases) noexcept;
  // A revocation issued at `now` for lease `id` of priority `victim` on `endpoint`, freeing
  // `credit` saturation units; `restored`: by reserve restoration.
  void issued(RequestId id, Priority victim, TimePoint now, double credit, std::uint32_t endpoint,
              bool restored) noexcept;
  // A head-of-line decision left the block to the releases expected anyway.
  void deferred() noexcept { stats_.deferred += 1; }
  // A restoration decision revoked less than it sized: its budgets ran out.
  void withheld() noexcept { stats_.budgetWithheld += 1; }
  // The deficit the last decision sized, in saturation units.
  void setReclaimTarget(double target) noexcept { stats_.reclaimTarget = target; }

  // The counters, with the pending debit and the outstanding and cooling counts (`enabled` and
  // `leases` are the owner's). Allocates (the per-priority counts).
  [[nodiscard]] EvictionStats stats() const;

 private:
  // Moves outstanding revocation `i` to cooling until now + `grace` (confirmed or timed out).
  void endOutstanding(std::size_t i, TimePoint now, Duration grace, bool timedOut) noexcept;
  // endOutstanding for the revocation of lease `id`, if it is outstanding.
  void endOutstandingOf(RequestId id, TimePoint now, Duration grace, bool timedOut) noexcept;
  void issuedFor(Priority victim);
  void countLeaseEnd(LeaseEnd end) noexcept {
    stats_.leaseEnds[static_cast<std::size_t>(end)] += 1;
  }

  std::vector<Outstanding> outstanding_;
  std::vector<Cooling> cooling_;
  double pending_reclaim_ = 0.0;
  EvictionStats stats_;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
