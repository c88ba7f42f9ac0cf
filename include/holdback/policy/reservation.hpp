// reservation-holdback-policy: holdback sized from measured demand (trunk reservation).
//
// The algorithm
//   Fixed holdback (stepwise and friends) keeps the same reserve whether or not anybody needs it.
//   This policy keeps, below every band, room for the bands above it, sized from their measured
//   demand (policy/demand.hpp), and gives the rest to lower bands. With priorities highest first,
//   band i's ceiling is
//
//       c_i = clamp(1 - R_i * u, minCeiling, maxCeiling),   c_0 = maxCeiling
//       R_i = max(minReserve, minReserveShare / u, r_i) + feedback extras of bands 0..i-1
//
//   The saturation the ceiling is compared with counts every request in flight, the higher
//   bands' included, so R_i is *free* room: band i is dispatched only while more than R_i
//   requests' worth of the pool is free. Two sizings of r_i (option `sizing`):
//
//   refill (default): r_i = the smallest r >= 1 with rho_i^r <= eps_i, rho_i = L_i / M.
//     While band i waits at its ceiling the free room is a birth-death walk: a higher-band
//     arrival takes one slot (rate L_i), any completion frees one (rate M). Its deficit below
//     R_i is geometric with ratio rho_i, so an arrival finds the pool full with probability
//     about rho_i^R: R_i = ceil(ln eps_i / ln rho_i). rho_i >= 1 (higher demand outruns the
//     pool's turnover) gives an infinite reserve, i.e. minCeiling; no higher-band arrivals give
//     1 slot (the first arrival of an idle band).
//   occupancy: r_i = r(A_i, eps_i) + L_i * T_i, the Poisson quantile of the higher bands' whole
//     occupancy plus their arrivals during a refill: the trunk-reservation equation of the
//     design note. Conservative here, because the higher bands' in-flight requests are counted
//     twice (in A_i and in the saturation); kept for comparison.
//
//   L_i    sum of the smoothed arrival rates of bands 0..i-1 (requests/s);
//   M      the pool's turnover when full: (1 / u) x the measured completions per second per
//          in-flight request, sum_j completionRate_j / sum_j inFlight_j (a band whose
//          completionRate is 0 counts inFlight_j / holdingTime_j instead: a host's own view);
//          the completion rate itself when u is unknown. Nothing completed yet = 0, so any
//          higher-band arrival rate means minCeiling: the policy starts protective (option
//          protectiveStart; false: an unknown turnover sizes no reserve beyond the floors, for a
//          configuration whose reserve restoration repairs a shortfall, see below). The
//          completion rate, not 1 / holdingTime, because the first completions are the
//          shortest requests: a holding-time average starts biased short (and M high);
//   A_i    sum of the smoothed occupancy (in flight + queued) of bands 0..i-1 (Little's a);
//   r(a, eps)  the smallest r with P(Poisson(a) >= r) <= eps; r(0, eps) = 1;
//   T_i    `refillHorizon` when set, else 1 / (sum over bands i.. of inFlight_j / holdingTime_j);
//   eps_i  the band's `epsilon` (per-priority override) or the default;
//   u      saturation units per request: the view's requestUnit (the controller reports
//          saturation / in-flight, 1 / maxConcurrency for the concurrency detector), else the
//          configured `requestUnit`; when neither is known every band gets maxCeiling (nothing
//          can be converted; with nothing in flight the pool is idle anyway).
//   When the higher bands have no demand the reserve falls to max(minReserve, 1) slot: the policy
//   is work-conserving in idle windows. The ceilings are non-increasing by construction (L_i and
//   A_i grow down the list); the monotonizing sweep still runs.
//
//   Cost per band: refill, two logarithms (ln eps could be cached; it is not, see
//   docs/performance.md); occupancy, r(a, eps) (policy/poisson_reserve.hpp: at most ~60 terms;
//   z = Phi^-1(1 - eps) computed once per epsilon at creation).
//
// Hold (option holdReserve, on by default): a slot given to band i now stays taken for about band
// i's holding time, so a reserve that dips and recovers within that time has already handed the
// room out when it is needed again (the simulator's settled-burst misses,
// docs/results/policies.md). The reserve therefore rises at once and falls no faster than
// exponentially with time constant H_i, band i's measured holdingTime (decayTime until one is
// measured):
//
//     held_i(t) = max(R_i(t), R_i(t) + (held_i(t') - R_i(t)) exp(-(t - t') / H_i))
//
// An infinite R_i is held as (1 - minCeiling) / u, the reserve at which the ceiling is minCeiling
// anyway. In-flight cap: what the hold keeps beyond R_i is for the bands above i, so it is at most
// their in-flight count (held_i <= R_i + sum_{j<i} inFlight_j, applied before it is stored; only
// when the view has every band's figures): once they have drained after a burst the reserve falls
// to R_i at once, while in a burst and in idle windows their in-flight count is above the excess.
// It needs DemandView::now (no clock, no hold: the computation is then a pure function).
// reserves() returns R_i before the hold.
//
// Capacity model (option capacityModel). The reserve R_i counts requests of the bands above i.
//   pooled (the default): converted to saturation with u, the pool's mean footprint per request
//     in flight (c_i above). On a pool whose KV cache binds, u is mostly the lower bands' long
//     requests, so a reserve of R short protected requests withholds the room of R long ones.
//   endpoints: counted where it exists, in the resource that binds on each endpoint
//     (DemandView::room, holdback/core/capacity.hpp): band i is held whenever placing one more
//     band-i request would leave room for fewer than R_i requests of the protected bands'
//     footprint (their arrival-weighted mean KV tokens), i.e. fitsAfter_i < R_i. Its ceiling is
//     expressed against the current saturation s so that the controller's gate (s >= c_i) holds
//     exactly then:
//       c_i = clamp(s + (fitsAfter_i - R_i + 1) w_i, minCeiling, maxCeiling)   fitsAfter_i >= R_i
//       c_i = clamp(s - (R_i - fitsAfter_i) w_i, minCeiling, maxCeiling)       otherwise
//     w_i > 0, the saturation one protected request's room is worth: (1 - s) / fits_i while
//     s < 1 and fits_i >= 1, else u, else 1 / 64. A band whose room is unknown (NaN: the
//     detector reports no room, or nothing was declared yet) falls back to the pooled
//     conversion; a band whose own request fits nowhere (fitsAfter -infinity) is held unless
//     s < minCeiling. The hold (below) caps an infinite R_i at fits_i + 1 here.
//
// Without demand (an empty view, e.g. the three-argument computeLimit), A_i = L_i = 0: every band
// below the top keeps max(minReserve, 1) request of reserve.
//
// Bad input: NaN or negative demand figures read as 0; a non-finite or non-positive requestUnit
// is "unknown". Saturation is not used. Priorities are positional (highest first expected);
// duplicates and unsorted lists still give finite, bounded, non-increasing ceilings.
//
// Feedback (optional, ReservationFeedback): a band whose approximate p95 queue wait exceeds its
// target gets an extra reserve that grows multiplicatively and shrinks additively (DAGOR-style);
// it needs DemandView::now and waitP95. With `poissonSizing: false` the extras (plus minReserve)
// are the whole reserve: the stand-alone feedback anchor.
//
// Thread safety: thread-safe. Without feedback and hold it is immutable after creation; the
// feedback and hold state are atomics, advanced by one caller at a time (a concurrent caller skips
// the update; it still applies the held reserves it reads).
// computeLimit allocates nothing and does not throw.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/core/diagnostics.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/poisson_reserve.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The tail probability used to size band `priority`'s ceiling (the reserve kept for the bands
// above it).
struct ReservationEpsilon {
  Priority priority = 0;
  double epsilon = 0.01;
};

// A per-priority queue-wait target for the feedback trim.
struct ReservationWaitTarget {
  Priority priority = 0;
  std::chrono::nanoseconds wait{};
};

// DAGOR-style outcome feedback on top of (or instead of) the Poisson sizing: every `interval`, a
// band whose approximate p95 queue wait (BandDemand::waitP95) exceeds its target gets more room
// kept for it below: its extra reserve grows multiplicatively (max(1, extra) x increase, at most
// maxExtra requests); otherwise it shrinks additively by `decrease` requests, to 0. The extra of
// band j is added to the reserve of every band below j.
struct ReservationFeedback {
  bool enabled = false;
  std::chrono::nanoseconds targetWait = std::chrono::milliseconds(50);
  std::vector<ReservationWaitTarget> targets;  // per-priority overrides (unique priorities)
  double increase = 1.5;                       // > 1
  double decrease = 0.5;                       // > 0 (requests per interval)
  double maxExtra = 1024.0;                    // > 0 (requests)
  std::chrono::nanoseconds interval = std::chrono::milliseconds(500);  // > 0
};

// Where the reserve is counted (see the file comment, "Capacity model").
enum class ReservationCapacity : std::uint8_t {
  kPooled,     // converted to saturation with the pool's mean footprint per request in flight
  kEndpoints,  // in protected requests' footprints that fit on some endpoint (DemandView::room)
};

// How R_i is sized from the demand (see the file comment).
enum class ReservationSizing : std::uint8_t {
  kOccupancy,  // r(A_i, eps) + L_i T_i: the Poisson quantile of the higher bands' whole occupancy
  kRefill,     // ceil(ln eps / ln rho_i), rho_i = L_i / M: free slots outlast the arrivals
};

struct ReservationOptions {
  // Default tail probability, in (0, 0.5]: 0.01 = a higher-band arrival finds a reserved slot
  // 99 % of the time.
  double epsilon = 0.01;
  // Per-priority overrides (unique priorities, any order; each epsilon in (0, 0.5]).
  std::vector<ReservationEpsilon> epsilons;
  // Bounds on every ceiling, 0 <= minCeiling < maxCeiling <= 1. maxCeiling is the top band's
  // ceiling; minCeiling keeps the lowest bands from being shut out completely.
  double minCeiling = 0.0;
  double maxCeiling = 1.0;
  // The least reserve in requests kept below the top band, >= 0 (a floor that covers a burst's
  // onset before the estimate rises).
  double minReserve = 0.0;
  // The least reserve as a share of the pool, in [0, 1): at least minReserveShare / u requests
  // (u the saturation units per request, so 1 / u is the pool's size in requests); the larger of
  // the two floors applies. Unlike minReserve it follows the pool when servers are added or
  // removed (autoscaling). 0.125 = an eighth of the pool (the simulator's reservation+evict arm,
  // docs/guide/eviction.md). No effect while u is unknown (every band then has maxCeiling).
  double minReserveShare = 0.0;
  // The refill time T; unset = estimated from the lower bands' leases (see the file comment).
  std::optional<std::chrono::nanoseconds> refillHorizon;
  // Saturation units per request when the caller does not report one (e.g. 1 / maxConcurrency);
  // unset = none. Must be in (0, 1].
  std::optional<double> requestUnit;
  // How the controller smooths the demand this policy reads (rise and decay > 0, decay >= rise).
  DemandSmoothing smoothing;
  // true (default): the reserve falls no faster than the admitted band's holding time (the hold
  // of the file comment); false: R_i as computed at each call.
  bool holdReserve = true;
  // true (default): while no completion has been measured (the pool's turnover M is unknown,
  // e.g. for the first seconds of a cold start, when every request is still streaming) a band
  // below one with arrivals keeps an unbounded reserve, i.e. minCeiling: the policy starts
  // protective. false: an unknown turnover sizes no reserve beyond the floors (minReserve,
  // minReserveShare): for configurations with reserve restoration (eviction), which repairs a
  // shortfall within a revocation's lead time instead (the recommended configuration).
  // A file sets neither holdReserve nor protectiveStart (deprecated keys, still applied): both
  // are off with reserve restoration on, else on (config/detail/derived_defaults.hpp).
  bool protectiveStart = true;
  // false: no Poisson sizing (R_i = minReserve + feedback extras only): the stand-alone feedback
  // anchor. true (default): the trunk-reservation sizing of the file comment.
  bool poissonSizing = true;
  // Experiment switches, no configuration keys (deprecated in files, still applied): the
  // simulator's reservation-occupancy, feedback and reservation+feedback arms set them
  // (sim::Arm::reservationSwitches).
  ReservationSizing sizing = ReservationSizing::kRefill;
  ReservationFeedback feedback;
  ReservationCapacity capacityModel = ReservationCapacity::kPooled;
};

class HOLDBACK_API ReservationPolicy final : public UsageLimitPolicy {
 public:
  static constexpr std::string_view kType = "reservation-holdback-policy";

  static Result<std::unique_ptr<ReservationPolicy>> create(ReservationOptions options,
                                                           std::string name = std::string(kType));
  // Appends one error per invalid field; `path` is the JSON pointer of the parameters object.
  static void validate(const ReservationOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  // holdback::poissonReserve and inverseNormal (policy/poisson_reserve.hpp), kept for callers
  // that name them through the policy.
  [[nodiscard]] static double poissonReserve(double a, double epsilon, double z) noexcept;
  // The refill sizing's reserve: the smallest r >= 1 with rho^r <= eps; rho <= 0 or NaN -> 1,
  // rho >= 1 -> infinity.
  [[nodiscard]] static double refillReserve(double rho, double epsilon) noexcept;
  [[nodiscard]] static double inverseNormal(double p) noexcept;

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] bool usesDemand() const noexcept override { return true; }
  [[nodiscard]] bool usesRoom() const noexcept override {
    return options_.capacityModel == ReservationCapacity::kEndpoints;
  }
  [[nodiscard]] DemandSmoothing demandSmoothing() const noexcept override {
    return options_.smoothing;
  }
  // minReserve (UsageLimitPolicy::fixedReserve).
  [[nodiscard]] double fixedReserve() const noexcept override { return options_.minReserve; }
  [[nodiscard]] const ReservationOptions& options() const noexcept { return options_; }

  // The reserve R_i (requests) kept below band i for the given inputs and the current feedback
  // state, before the hold; exposed for tests. Does not advance feedback or hold state.
  void reserves(std::span<const Priority> priorities, const DemandView& demand,
                std::span<double> out) const noexcept;
  // The feedback extra (requests) currently kept for band `priority`; 0 when none.
  [[nodiscard]] double feedbackExtra(Priority priority) const noexcept;

  // Feedback and hold state is kept for at most this many bands (positions); bands beyond get
  // none (their reserve is not held).
  static constexpr std::size_t kMaxFeedbackBands = 64;

 protected:
  void compute(double saturation, std::span<const Priority> priorities,
               std::span<double> ceilings) noexcept override {
    computeWithDemand(saturation, priorities, ceilings, DemandView{});
  }
  void computeWithDemand(double saturation, std::span<const Priority> priorities,
                         std::span<double> ceilings, const DemandView& demand) noexcept override;

 private:
  ReservationPolicy(ReservationOptions options, std::string name);
  // eps and z for `priority` (binary search in the sorted overrides).
  void epsilonFor(Priority priority, double& eps, double& z) const noexcept;

  // Advances the feedback state when an interval has passed (one caller at a time; others skip).
  void updateFeedback(std::span<const Priority> priorities, const DemandView& demand) noexcept;
  [[nodiscard]] double extraAt(std::size_t position, Priority priority) const noexcept;
  // Applies the hold to reserves[i] (requests; see the file comment), advancing the state when
  // this caller gets it. `unit` > 0.
  void holdReserves(std::span<const Priority> priorities, const DemandView& demand, double unit,
                    bool endpoints, std::span<double> reserves) noexcept;
  // Band i's ceiling from its room (capacityModel endpoints; see the file comment); nullopt when
  // the room is unknown.
  [[nodiscard]] std::optional<double> roomCeiling(double saturation, const BandRoom& room,
                                                  double reserve, double unit) const noexcept;

  static constexpr std::int64_t kNoPriority = std::numeric_limits<std::int64_t>::min();
  struct FeedbackSlot {
    std::atomic<std::int64_t> priority{kNoPriority};
    std::atomic<double> extra{0.0};
  };

  ReservationOptions options_;  // epsilons and feedback targets sorted by priority, highest first
  std::vector<double> band_z_;  // z for each entry of options_.epsilons
  double default_z_ = 0.0;
  std::array<FeedbackSlot, kMaxFeedbackBands> feedback_{};
  std::atomic<std::int64_t> last_feedback_ns_{kNoPriority};
  std::atomic<bool> feedback_busy_{false};
  struct HoldSlot {
    std::atomic<std::int64_t> priority{kNoPriority};
    std::atomic<double> held{0.0};  // requests
    std::atomic<std::int64_t> at_ns{0};
  };
  std::array<HoldSlot, kMaxFeedbackBands> hold_{};
  std::atomic<bool> hold_busy_{false};
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/policy/reservation-inl.hpp"
#endif
