// Implementation of holdback/flow/detail/revocation_pacer.hpp (compiled by src/flow.cpp, or
// included by flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/revocation_pacer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE void deliverRevocations(
    const RevocationBatch& batch, const std::function<void(const Revocation&)>& evict) noexcept {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    HOLDBACK_TRY {
      evict(batch.at(i));
    }
    HOLDBACK_CATCH_ALL {
      // The host's callback threw: the revocation stays outstanding and times out.
    }
  }
}

HOLDBACK_INLINE RevocationPacer::RevocationPacer() {
  // Stop-and-wait keeps outstanding + cooling within one decision's cap.
  outstanding_.reserve(kMaxRevocationsPerDecisionLimit);
  cooling_.reserve(kMaxRevocationsPerDecisionLimit);
}

HOLDBACK_INLINE std::size_t RevocationPacer::headOfLineCount(double net, double credit) noexcept {
  const double ratio = std::min(net / credit, 1e9);
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(ratio)));
}

HOLDBACK_INLINE double RevocationPacer::leadSeconds(Duration configured,
                                                    Duration grace) const noexcept {
  const double lead = std::chrono::duration<double>(configured).count();
  if (lead > 0.0) return lead;
  const double measured =
      stats_.confirmed > 0 ? stats_.confirmationSumSeconds / static_cast<double>(stats_.confirmed)
                           : 0.0;
  return measured + std::chrono::duration<double>(grace).count();
}

HOLDBACK_INLINE void RevocationPacer::leaseReleased(const LeaseTable::Lease& lease, TimePoint now,
                                                    const EvictionOptions& options) noexcept {
  if (lease.revoked) {  // the confirmation of a revocation
    endOutstandingOf(lease.id, now, options.confirmationGrace, /*timedOut=*/false);
    countLeaseEnd(LeaseEnd::kRevokedConfirmed);
    return;
  }
  countLeaseEnd(LeaseEnd::kReleased);
}

HOLDBACK_INLINE void RevocationPacer::reapLeases(LeaseTable& leases, TimePoint now,
                                                 Duration leaseTimeout,
                                                 const EvictionOptions& options) noexcept {
  if (leases.size() == 0) return;
  for (std::uint32_t b = 0; b < leases.bandCapacity(); ++b) {
    for (;;) {
      LeaseTable::Id oldest = 0;
      leases.oldestFirst(b, [&](const LeaseTable::Lease& l) {
        if (elapsed(l.dispatchedAt, now) >= leaseTimeout) oldest = l.id;
        return false;
      });
      if (oldest == 0) break;
      const std::optional<LeaseTable::Lease> gone = leases.remove(oldest);
      if (gone && gone->revoked) {  // an outstanding revocation: it ends timed out
        endOutstandingOf(oldest, now, options.confirmationGrace, /*timedOut=*/true);
        countLeaseEnd(LeaseEnd::kRevokedTimedOut);
      } else {
        countLeaseEnd(LeaseEnd::kReaped);
      }
    }
  }
}

HOLDBACK_INLINE void RevocationPacer::endOutstanding(std::size_t i, TimePoint now, Duration grace,
                                                     bool timedOut) noexcept {
  const Outstanding o = outstanding_[i];
  outstanding_[i] = outstanding_.back();
  outstanding_.pop_back();
  cooling_.push_back(Cooling{now + grace, o.credit, o.endpoint});
  if (timedOut) {
    stats_.timedOut += 1;
    return;
  }
  stats_.confirmed += 1;
  const double latency = std::max(0.0, std::chrono::duration<double>(now - o.issuedAt).count());
  std::size_t b = 0;
  while (b < kRevocationConfirmationBucketsSeconds.size() &&
         latency > kRevocationConfirmationBucketsSeconds[b]) {
    ++b;
  }
  stats_.confirmationBuckets[b] += 1;
  stats_.confirmationSumSeconds += latency;
}

HOLDBACK_INLINE void RevocationPacer::endOutstandingOf(RequestId id, TimePoint now, Duration grace,
                                                       bool timedOut) noexcept {
  for (std::size_t i = 0; i < outstanding_.size(); ++i) {
    if (outstanding_[i].id == id) {
      endOutstanding(i, now, grace, timedOut);
      return;
    }
  }
}

HOLDBACK_INLINE void RevocationPacer::retire(TimePoint now, const EvictionOptions& options,
                                             LeaseTable& leases) noexcept {
  for (std::size_t i = outstanding_.size(); i-- > 0;) {
    if (elapsed(outstanding_[i].issuedAt, now) > options.confirmationTimeout) {
      // Treated as confirmed: the lease ends here (a late release finds nothing).
      if (leases.remove(outstanding_[i].id)) countLeaseEnd(LeaseEnd::kRevokedTimedOut);
      endOutstanding(i, now, options.confirmationGrace, /*timedOut=*/true);
    }
  }
  for (std::size_t i = cooling_.size(); i-- > 0;) {
    if (now >= cooling_[i].expiresAt) {
      pending_reclaim_ = std::max(0.0, pending_reclaim_ - cooling_[i].credit);
      cooling_[i] = cooling_.back();
      cooling_.pop_back();
    }
  }
  if (outstanding_.empty() && cooling_.empty()) pending_reclaim_ = 0.0;  // no rounding residue
}

HOLDBACK_INLINE void RevocationPacer::issued(RequestId id, Priority victim, TimePoint now,
                                             double credit, std::uint32_t endpoint,
                                             bool restored) noexcept {
  outstanding_.push_back(Outstanding{id, now, credit, endpoint});
  pending_reclaim_ += credit;
  stats_.issued += 1;
  if (restored) stats_.restored += 1;
  issuedFor(victim);
}

HOLDBACK_INLINE void RevocationPacer::issuedFor(Priority victim) {
  auto& by = stats_.issuedByPriority;
  auto it = std::lower_bound(by.begin(), by.end(), victim,
                             [](const auto& e, Priority p) { return e.first < p; });
  if (it == by.end() || it->first != victim) it = by.insert(it, {victim, 0});
  it->second += 1;
}

HOLDBACK_INLINE EvictionStats RevocationPacer::stats() const {
  EvictionStats out = stats_;
  out.pendingReclaim = pending_reclaim_;
  out.outstanding = outstanding_.size();
  out.cooling = cooling_.size();
  return out;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
