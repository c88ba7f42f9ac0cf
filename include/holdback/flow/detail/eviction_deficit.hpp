// The eviction deficits: how much room eviction must bring back, as pure functions of a value
// snapshot of the cycle. Internal.
//
// The algorithm
//   Head-of-line (a block at the demand band, upstream's deficit): target = s - ceiling(demand
//   band), net = target - pendingReclaim (the credits of the revocations still outstanding or
//   cooling), in saturation units.
//   Reserve (restoration before a block), in requests of unit u = s / the pool's leases:
//     over   = (s - ceiling(victim band)) / u, the requests beyond the victim band's ceiling
//              (nothing to restore when <= 0: the policy's reserve is intact);
//     wanted = r(lambda x lead, eps), the Poisson reserve for the protected bands' arrivals
//              over the lead time (policy/poisson_reserve.hpp);
//     room   = (ceiling(top band) - s) / u, free for the top band;
//     target = min(over, wanted - room) - completions x lead (the releases expected anyway);
//     deficit = target - pending (the revocations outstanding or cooling, the pool's with
//              replicas).
//   The protected arrival rate may be a decayed peak (BurstMemory: restoreReserve.burstMemory).
//   Wait-vs-evict (waitForReleases): the releases expected within a horizon, each lease's chance
//   from its age and its band's mean holding time (releaseChance: due by then when younger than
//   the mean, memoryless beyond it).
//
// Cost: O(1) but expectedReleases (O(leases)); no allocation.
//
// Thread safety: pure functions, but BurstMemory (thread-compatible; the evictor's, under the
// controller's mutex).
#pragma once

#include <optional>
#include <span>

#include "holdback/core/types.hpp"
#include "holdback/flow/detail/demand_tracker.hpp"
#include "holdback/flow/detail/lease_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct HeadOfLineDeficit {
  double target = 0.0;  // s - ceiling
  double net = 0.0;     // target - pendingReclaim
};
[[nodiscard]] HeadOfLineDeficit headOfLineDeficit(double saturation, double ceiling,
                                                  double pendingReclaim) noexcept;

// What the reserve deficit reads (see the header comment).
struct ReserveSnapshot {
  double saturation = 0.0;
  double unit = 0.0;           // saturation units per request
  double topCeiling = 0.0;     // the top band's ceiling
  double victimCeiling = 0.0;  // the victim band's ceiling
  double arrivalRate = 0.0;    // lambda, the protected bands' arrivals per second
  double completionRate = 0.0;
  double pending = 0.0;      // revocations outstanding or cooling
  double leadSeconds = 0.0;  // a revocation's lead time
  double epsilon = 0.0;
};
struct ReserveDeficit {
  double target = 0.0;   // requests
  double deficit = 0.0;  // target - pending
};
// Nothing when the victim band is within its ceiling (or the snapshot says nothing).
[[nodiscard]] std::optional<ReserveDeficit> reserveDeficit(const ReserveSnapshot& s) noexcept;

// The chance (0..1) that a lease of age `age` in a band holding `hold` seconds on average ends on
// its own within `horizon` seconds; 0 when `hold` is not measured.
[[nodiscard]] double releaseChance(double hold, double age, double horizon) noexcept;
// The releases expected within `horizon` seconds of `now` among the unrevoked leases of
// `leases` (bands as `slots`): in leases, or by footprint in saturation units (each lease's
// saturation * tokens / totalFootprint).
[[nodiscard]] double expectedReleases(const LeaseTable& leases,
                                      std::span<const DemandTracker::Slot> slots, TimePoint now,
                                      double horizon, bool byFootprint, double saturation,
                                      double totalFootprint) noexcept;

// The protected arrival rate restoration sizes for, with a memory of bursts.
class BurstMemory {
 public:
  // `lambda`, or the decayed peak of the earlier ones when `memory` > 0 (and larger); updates
  // the peak.
  double remember(TimePoint now, double lambda, Duration memory) noexcept;

 private:
  double peak_rate_ = 0.0;
  TimePoint peak_time_{};
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
