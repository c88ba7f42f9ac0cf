// reservation-holdback-policy: holdback sized from measured demand (trunk reservation).
//
// The algorithm
//   Fixed holdback (stepwise and friends) keeps the same reserve whether or not anybody needs it.
//   This policy keeps, below every band, room for the bands above it, sized from their measured
//   demand (policy/demand.hpp), and gives the rest to lower bands. With priorities highest first,
//   band i's ceiling is
//
//       c_i = clamp(1 - R_i * u, minCeiling, maxCeiling),   c_0 = maxCeiling
//       R_i = max(minReserve, r(A_i, eps_i) + L_i * T_i)
//
//   A_i    sum of the smoothed occupancy (in flight + queued) of bands 0..i-1 (Little's a);
//   r(a, eps)  the smallest r with P(Poisson(a) >= r) <= eps: a higher-band arrival finds one of
//          the r reserved slots free with probability >= 1 - eps (by M/G/inf insensitivity the
//          occupancy of an unconstrained class is Poisson(a) whatever its service times);
//          r(0, eps) = 1, so one slot stays free for the first arrival of an idle higher band;
//   L_i    sum of the smoothed arrival rates of bands 0..i-1 (requests/s);
//   T_i    the time a slot takes to free once the reserve is taken: `refillHorizon` when set,
//          else 1 / (sum over bands i.. of inFlight_j / holdingTime_j), the rate at which the
//          lower bands' leases end (0 when nothing lower is in flight); L_i * T_i covers the
//          higher-band arrivals during that refill;
//   eps_i  the band's `epsilon` (per-priority override) or the default;
//   u      saturation units per request: the view's requestUnit (the controller reports
//          saturation / in-flight, 1 / maxConcurrency for the concurrency detector), else the
//          configured `requestUnit`; when neither is known every band gets maxCeiling (nothing
//          can be converted; with nothing in flight the pool is idle anyway).
//   When the higher bands have no demand the reserve falls to max(minReserve, 1) slot: the policy
//   is work-conserving in idle windows. The ceilings are non-increasing by construction (A_i, L_i
//   and T_i grow down the list); the monotonizing sweep still runs.
//
//   r(a, eps) is computed exactly (summing the Poisson probabilities, at most ~60 terms) for
//   a <= 30 and by the Cornish-Fisher expansion a + z sqrt(a) + (z^2 - 1) / 6 + (z^3 - 7z) /
//   (72 sqrt(a)) above (z = Phi^-1(1 - eps), computed once per epsilon at creation); the
//   approximation is within one request of the exact quantile there (pinned by tests). Cost per
//   band: at most ~60 multiply-adds, O(1) above a = 30.
//
// Without demand (an empty view, e.g. the three-argument computeLimit), A_i = L_i = 0: every band
// below the top keeps max(minReserve, 1) request of reserve.
//
// Bad input: NaN or negative demand figures read as 0; a non-finite or non-positive requestUnit
// is "unknown". Saturation is not used. Priorities are positional (highest first expected);
// duplicates and unsorted lists still give finite, bounded, non-increasing ceilings.
//
// Thread safety: thread-safe (immutable after creation). computeLimit allocates nothing and does
// not throw.
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/core/diagnostics.hpp"
#include "holdback/policy/demand.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The tail probability used to size band `priority`'s ceiling (the reserve kept for the bands
// above it).
struct ReservationEpsilon {
  Priority priority = 0;
  double epsilon = 0.01;
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
  // The refill time T; unset = estimated from the lower bands' leases (see the file comment).
  std::optional<std::chrono::nanoseconds> refillHorizon;
  // Saturation units per request when the caller does not report one (e.g. 1 / maxConcurrency);
  // unset = none. Must be in (0, 1].
  std::optional<double> requestUnit;
  // How the controller smooths the demand this policy reads (rise and decay > 0, decay >= rise).
  DemandSmoothing smoothing;
};

class HOLDBACK_API ReservationPolicy final : public UsageLimitPolicy {
 public:
  static constexpr std::string_view kType = "reservation-holdback-policy";

  static Result<std::unique_ptr<ReservationPolicy>> create(ReservationOptions options,
                                                           std::string name = std::string(kType));
  // Appends one error per invalid field; `path` is the JSON pointer of the parameters object.
  static void validate(const ReservationOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  // r(a, eps) with z = Phi^-1(1 - eps) precomputed (see the file comment). a <= 0 or NaN -> 1.
  [[nodiscard]] static double poissonReserve(double a, double epsilon, double z) noexcept;
  // Phi^-1(p) for p in (0, 1) (Acklam's rational approximation, relative error < 1.2e-9).
  [[nodiscard]] static double inverseNormal(double p) noexcept;

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] bool usesDemand() const noexcept override { return true; }
  [[nodiscard]] DemandSmoothing demandSmoothing() const noexcept override {
    return options_.smoothing;
  }
  [[nodiscard]] const ReservationOptions& options() const noexcept { return options_; }

  // The reserve (requests) that the last-called computation would keep below band i; exposed for
  // tests and the simulator's interval output: computes R_i for the given inputs.
  void reserves(std::span<const Priority> priorities, const DemandView& demand,
                std::span<double> out) const noexcept;

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

  ReservationOptions options_;  // epsilons sorted by priority, highest first
  std::vector<double> band_z_;  // z for each entry of options_.epsilons
  double default_z_ = 0.0;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/policy/reservation-inl.hpp"
#endif
