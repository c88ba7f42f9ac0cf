// UsageLimitPolicy: what the admission ceiling of every priority band is, right now.
//
// The algorithm
//   Once per dispatch cycle the flow controller calls computeLimit(saturation, priorities,
//   ceilings). `priorities` lists every band the policy should consider, highest first; the
//   policy writes one ceiling c_i in [0, 1] per band into the caller-owned `ceilings` buffer (the
//   caller pre-fills it with 1.0, so an element a policy leaves alone means "no holdback"). A band
//   is gated when `saturation >= c_i` (see isGated()), so 0.0 means fully gated and 1.0 means
//   "dispatch until the pool is fully saturated".
//
//   computeLimit is a non-virtual wrapper (template method) around the strategy's compute():
//     1. n = min(priorities.size(), ceilings.size()); n == 0 writes nothing;
//     2. saturation is normalized: NaN -> 1.0 (unobservable means saturated), negative -> 0.0,
//        +inf stays +inf;
//     3. the strategy writes ceilings[0..n);
//     4. monotonize() clamps every ceiling into [0, 1] (NaN -> 0.0) and runs the right-to-left
//        sweep c[i] = max(c[i], c[i+1]), so a higher priority is never gated before a lower one.
//   Therefore every ceiling written by any policy, a host's own included, is finite, within
//   [0, 1] and non-increasing down the list, whatever the input (unsorted or duplicate
//   priorities, INT_MIN/INT_MAX, NaN or infinite saturation).
//
// Thread safety: thread-safe (computeLimit may be called concurrently; stateful policies use
// atomics). computeLimit does not allocate and does not throw.
#pragma once

#include "holdback/abi.hpp"
#include "holdback/policy/demand.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The gate: true when a band with `ceiling` must not dispatch at `saturation`. Written as
// !(saturation < ceiling) so that nothing non-finite can ever open a gate: a NaN on either side
// gates.
[[nodiscard]] constexpr bool isGated(double saturation, double ceiling) noexcept {
  return !(saturation < ceiling);
}

// NaN -> 1.0, negative (including -inf) -> 0.0, anything else unchanged (values above 1.0 measure
// overload and are kept; +inf stays +inf).
[[nodiscard]] inline double normalizeSaturation(double saturation) noexcept {
  if (std::isnan(saturation)) return 1.0;
  if (saturation < 0.0) return 0.0;
  return saturation;
}

// The monotonizing sweep. Clamps each ceiling into [0, 1] (NaN -> 0.0), then, right to left,
// raises c[i] to c[i+1] where it is lower. Afterwards c[0] >= c[1] >= ... >= c[n-1], all in [0, 1].
// Raising (not lowering) is deliberate: it never gates a band that the strategy left open.
//
// isMonotoneUnit() first checks, in one branch-free pass the compiler vectorizes, whether the
// input is already non-increasing with c[0] <= 1 and c[n-1] >= 0 (which puts every element in
// [0, 1] and excludes NaN, since a NaN fails every comparison). On such input the sweep is the
// identity, bit for bit (-0.0 included), so it is skipped; the built-in strategies produce such
// input, so they pay one compare per element instead of the serial sweep.
[[nodiscard]] inline bool isMonotoneUnit(std::span<const double> c) noexcept {
  const std::size_t n = c.size();
  if (n == 0) return true;
  int bad = static_cast<int>(!(c[0] <= 1.0)) | static_cast<int>(!(c[n - 1] >= 0.0));
  std::size_t i = 0;
#if defined(__SSE2__)
  // GCC 12 does not vectorize the scalar loop (a compare feeding an OR reduction); 'not greater
  // or equal' is true for NaN, like the scalar !(a >= b).
  __m128d bad_a = _mm_setzero_pd();
  __m128d bad_b = _mm_setzero_pd();
  for (; i + 4 < n; i += 4) {
    bad_a =
        _mm_or_pd(bad_a, _mm_cmpnge_pd(_mm_loadu_pd(c.data() + i), _mm_loadu_pd(c.data() + i + 1)));
    bad_b = _mm_or_pd(
        bad_b, _mm_cmpnge_pd(_mm_loadu_pd(c.data() + i + 2), _mm_loadu_pd(c.data() + i + 3)));
  }
  bad |= _mm_movemask_pd(_mm_or_pd(bad_a, bad_b));
#endif
  for (; i + 1 < n; ++i) bad |= static_cast<int>(!(c[i] >= c[i + 1]));
  return bad == 0;
}

inline void monotonize(std::span<double> ceilings) noexcept {
  if (isMonotoneUnit(ceilings)) return;
  double floor = 0.0;
  for (std::size_t i = ceilings.size(); i-- > 0;) {
    double c = ceilings[i];
    if (!(c >= 0.0)) c = 0.0;  // NaN and negatives
    if (c > 1.0) c = 1.0;
    if (c < floor) c = floor;
    ceilings[i] = c;
    floor = c;
  }
}

class HOLDBACK_API UsageLimitPolicy {
 public:
  virtual ~UsageLimitPolicy() = default;
  UsageLimitPolicy(const UsageLimitPolicy&) = delete;
  UsageLimitPolicy& operator=(const UsageLimitPolicy&) = delete;

  // Writes ceilings[0..n), n = min(priorities.size(), ceilings.size()); see the file comment.
  void computeLimit(double saturation, std::span<const Priority> priorities,
                    std::span<double> ceilings) noexcept {
    const std::size_t n = priorities.size() < ceilings.size() ? priorities.size() : ceilings.size();
    if (n == 0) return;
    if (uniform_ceiling_ >= 0.0) {  // a constant in [0, 1]: monotone by construction
      fillUniform(ceilings.first(n));
      return;
    }
    if (computes_swept_) {  // a built-in strategy that returns swept ceilings itself
      computeSwept(normalizeSaturation(saturation), priorities.first(n), ceilings.first(n));
      return;
    }
    compute(normalizeSaturation(saturation), priorities.first(n), ceilings.first(n));
    monotonize(ceilings.first(n));
  }

  // The same with the bands' measured demand (policy/demand.hpp), for policies that size their
  // holdback from it. `demand.bands` is used only when it is exactly as long as `priorities`;
  // otherwise the policy sees an empty view. Policies that ignore demand compute exactly what the
  // three-argument form computes.
  void computeLimit(double saturation, std::span<const Priority> priorities,
                    std::span<double> ceilings, const DemandView& demand) noexcept {
    const std::size_t n = priorities.size() < ceilings.size() ? priorities.size() : ceilings.size();
    if (n == 0) return;
    DemandView view = demand;
    view.bands = demand.bands.size() == priorities.size() ? demand.bands.first(n)
                                                          : std::span<const BandDemand>{};
    computeWithDemand(normalizeSaturation(saturation), priorities.first(n), ceilings.first(n),
                      view);
    monotonize(ceilings.first(n));
  }

  // True when the policy reads demand, so a caller may skip measuring it otherwise.
  [[nodiscard]] virtual bool usesDemand() const noexcept { return false; }
  // True when the policy reads DemandView::room (the pool's room per band in its protected
  // requests' footprints), so a caller may skip computing it otherwise.
  [[nodiscard]] virtual bool usesRoom() const noexcept { return false; }
  // How the caller should smooth the demand it reports (policy/demand.hpp).
  [[nodiscard]] virtual DemandSmoothing demandSmoothing() const noexcept { return {}; }
  // Capability: the requests the policy keeps free for its top band whatever the demand (the
  // reservation policy's minReserve), so that a host can look past them (the example gateway's
  // slot probe) and leave them to every replica (DispatchLedgerOptions::sharedRoomSlots). The
  // default: 0 (no fixed reserve). Finite and >= 0.
  [[nodiscard]] virtual double fixedReserve() const noexcept { return 0.0; }

  // The registered plugin type, e.g. "priority-holdback-policy".
  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  // The configured plugin name (defaults to the type).
  [[nodiscard]] std::string_view name() const noexcept { return name_; }

 protected:
  explicit UsageLimitPolicy(std::string name) : name_(std::move(name)) {}

  // The strategy. Called with n >= 1 equal-length spans and a normalized saturation (never NaN,
  // never negative). Must not allocate or throw. The result is monotonized afterwards.
  virtual void compute(double saturation, std::span<const Priority> priorities,
                       std::span<double> ceilings) noexcept = 0;

  // The demand-aware strategy; the default ignores demand and calls compute(). Same contract.
  virtual void computeWithDemand(double saturation, std::span<const Priority> priorities,
                                 std::span<double> ceilings,
                                 const DemandView& /*demand*/) noexcept {
    compute(saturation, priorities, ceilings);
  }

 private:
  friend class StaticUsageLimitPolicy;
  friend class PriorityHoldbackPolicy;

  // compute() followed by the sweep. computeLimit() calls it instead of those two only when
  // computes_swept_ is set, which only the built-in PriorityHoldbackPolicy does: its override
  // returns, bit for bit, what compute() + monotonize() would (tests/policy/
  // policy_fast_path_test.cpp fuzzes that), from a table or a memo where it can. A host's
  // policy cannot set the flag, so its output is always swept here.
  virtual void computeSwept(double saturation, std::span<const Priority> priorities,
                            std::span<double> ceilings) noexcept {
    compute(saturation, priorities, ceilings);
    monotonize(ceilings);
  }

  void fillUniform(std::span<double> ceilings) const noexcept {
    // A local copy (the stores could alias the member), four elements per iteration (as one
    // two-store loop gcc 12 ran the N = 64 fill at half the speed of the floor's fill).
    const double u = uniform_ceiling_;
    double* const c = ceilings.data();
    const std::size_t n = ceilings.size();
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      c[i] = u;
      c[i + 1] = u;
      c[i + 2] = u;
      c[i + 3] = u;
    }
    for (; i < n; ++i) c[i] = u;
  }

  std::string name_;
  // Set only by StaticUsageLimitPolicy (its validated threshold, in (0, 1]): computeLimit() then
  // fills it without the virtual call or the sweep, which would both be the identity. Negative
  // (unset) for every other policy.
  double uniform_ceiling_ = -1.0;
  bool computes_swept_ = false;  // see computeSwept()
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
