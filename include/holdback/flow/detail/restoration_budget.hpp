// detail::RestorationBudget: the eviction and waste budgets of reserve restoration
// (ReserveRestoreOptions::evictionBudget / wasteBudget). Internal.
//
// The algorithm
//   Two token buckets, each off while its rate is 0.
//   - Evictions: earns `evictionBudget` per lease started in a protected band (one the eviction
//     filter never accepts), holds at most `evictionBurst`; a revocation costs 1 and needs 1.
//   - Waste: earns `wasteBudget` x the holding time of every lease of a victim band (one the
//     filter may accept) that ends on its own (released, not revoked), holds at most
//     `wasteBurst`; a revocation costs its victim's age (now - dispatch) and needs the bucket
//     above 0 (it may go negative by one victim's age, which later completions pay back).
//   Both start full. Over a run, revocations by restoration stay within
//   evictionBurst + evictionBudget x protected leases, and the slot time they destroy within
//   wasteBurst + one victim's age + wasteBudget x the victim bands' completed slot time.
//
// Cost: O(1) per lease start and end and per revocation; no allocation, no host code.
// Thread safety: thread-compatible; the owner (Evictor) calls it under the controller's mutex.
#pragma once

#include <algorithm>
#include <chrono>

#include "holdback/core/types.hpp"
#include "holdback/flow/eviction.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

class RestorationBudget {
 public:
  // Whether either budget is on.
  [[nodiscard]] static bool on(const ReserveRestoreOptions& o) noexcept {
    return o.evictionBudget > 0.0 || o.wasteBudget > 0.0;
  }
  // A lease started in a protected band.
  void protectedStarted(const ReserveRestoreOptions& o) noexcept {
    if (!(o.evictionBudget > 0.0)) return;
    fill(o);
    evictions_ = std::min(o.evictionBurst, evictions_ + o.evictionBudget);
  }
  // A lease of a victim band ended on its own after holding its slot `held`.
  void victimBandCompleted(const ReserveRestoreOptions& o, Duration held) noexcept {
    if (!(o.wasteBudget > 0.0)) return;
    fill(o);
    waste_ = std::min(burstSeconds(o), waste_ + o.wasteBudget * std::max(0.0, seconds(held)));
  }
  // Whether one more revocation fits both budgets.
  [[nodiscard]] bool allows(const ReserveRestoreOptions& o) noexcept {
    fill(o);
    evictions_ = std::min(evictions_, o.evictionBurst);  // a reload may have lowered the bursts
    waste_ = std::min(waste_, burstSeconds(o));
    return (!(o.evictionBudget > 0.0) || evictions_ >= 1.0 - 1e-9) &&
           (!(o.wasteBudget > 0.0) || waste_ > 0.0);
  }
  // A revocation of a lease of age `age` was issued.
  void spend(const ReserveRestoreOptions& o, Duration age) noexcept {
    if (o.evictionBudget > 0.0) evictions_ -= 1.0;
    if (o.wasteBudget > 0.0) waste_ -= std::max(0.0, seconds(age));
  }
  // The buckets' levels: revocations, and seconds of slot time.
  [[nodiscard]] double evictions() const noexcept { return evictions_; }
  [[nodiscard]] double waste() const noexcept { return waste_; }

 private:
  static double seconds(Duration d) noexcept { return std::chrono::duration<double>(d).count(); }
  static double burstSeconds(const ReserveRestoreOptions& o) noexcept {
    return seconds(o.wasteBurst);
  }
  // Both buckets start full (on the first use, with the options then in force).
  void fill(const ReserveRestoreOptions& o) noexcept {
    if (started_) return;
    started_ = true;
    evictions_ = o.evictionBurst;
    waste_ = burstSeconds(o);
  }

  bool started_ = false;
  double evictions_ = 0.0;
  double waste_ = 0.0;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
