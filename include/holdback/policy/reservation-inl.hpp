// Implementation of holdback/policy/reservation.hpp: compiled into libholdback by src/policy.cpp,
// or included by the header itself in header-only mode.
#pragma once

#include "holdback/policy/reservation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "holdback/core/text.hpp"
#include "holdback/policy/detail/reservation_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE double finiteNonNegative(double v) noexcept {
  return v > 0.0 && std::isfinite(v) ? v : 0.0;
}

HOLDBACK_INLINE bool validEpsilon(double eps) noexcept {
  return eps > 0.0 && eps <= 0.5;
}

HOLDBACK_INLINE void validateFeedback(const ReservationFeedback& feedback, const std::string& path,
                                      Diagnostics& diagnostics) {
  if (feedback.targetWait.count() < 0) {
    diagnostics.error(joinPath(path, "targetWait"), "must not be negative");
  }
  if (!(feedback.increase > 1.0 && std::isfinite(feedback.increase))) {
    diagnostics.error(joinPath(path, "increase"),
                      formatNumber(feedback.increase) + " must be a finite number > 1");
  }
  if (!(feedback.decrease > 0.0 && std::isfinite(feedback.decrease))) {
    diagnostics.error(joinPath(path, "decrease"),
                      formatNumber(feedback.decrease) + " must be a finite number > 0");
  }
  if (!(feedback.maxExtra > 0.0 && std::isfinite(feedback.maxExtra))) {
    diagnostics.error(joinPath(path, "maxExtra"),
                      formatNumber(feedback.maxExtra) + " must be a finite number > 0");
  }
  if (feedback.interval.count() <= 0) {
    diagnostics.error(joinPath(path, "interval"), "must be positive");
  }
  for (std::size_t i = 0; i < feedback.targets.size(); ++i) {
    const auto& target = feedback.targets[i];
    const std::string at = joinPath(joinPath(path, "targets"), std::to_string(target.priority));
    bool duplicate = false;
    for (std::size_t j = 0; j < i; ++j) {
      duplicate = duplicate || feedback.targets[j].priority == target.priority;
    }
    if (duplicate) {
      diagnostics.error(at, "priority " + std::to_string(target.priority) + " is listed twice");
    } else if (target.wait.count() < 0) {
      diagnostics.error(at, "must not be negative");
    }
  }
}

}  // namespace detail

HOLDBACK_INLINE double ReservationPolicy::inverseNormal(double p) noexcept {
  return holdback::inverseNormal(p);
}

HOLDBACK_INLINE double ReservationPolicy::poissonReserve(double a, double epsilon,
                                                         double z) noexcept {
  return holdback::poissonReserve(a, epsilon, z);
}

HOLDBACK_INLINE double ReservationPolicy::refillReserve(double rho, double epsilon) noexcept {
  if (!(rho > 0.0)) return 1.0;
  if (!(rho < 1.0)) return INFINITY;
  if (!(epsilon > 0.0)) epsilon = 1e-12;
  return std::max(1.0, std::ceil(std::log(epsilon) / std::log(rho)));
}

HOLDBACK_INLINE void ReservationPolicy::validate(const ReservationOptions& options,
                                                 const std::string& path,
                                                 Diagnostics& diagnostics) {
  const FieldTable<ReservationOptions> fields = kReservationFields;
  checkFields(fields, options, path, diagnostics);
  if (fieldValid(fields, "minCeiling", options) && fieldValid(fields, "maxCeiling", options) &&
      !(options.minCeiling < options.maxCeiling)) {
    diagnostics.error(joinPath(path, "minCeiling"), formatNumber(options.minCeiling) +
                                                        " must be below maxCeiling (" +
                                                        formatNumber(options.maxCeiling) + ")");
  }
  if (fieldValid(fields, "decayTime", options) &&
      options.smoothing.decay < options.smoothing.rise) {
    diagnostics.error(joinPath(path, "decayTime"), "must not be shorter than riseTime");
  }
  detail::validateFeedback(options.feedback, joinPath(path, "feedback"), diagnostics);
  for (std::size_t i = 0; i < options.epsilons.size(); ++i) {
    const auto& band = options.epsilons[i];
    const std::string at = joinPath(joinPath(path, "epsilons"), std::to_string(band.priority));
    bool duplicate = false;
    for (std::size_t j = 0; j < i; ++j)
      duplicate = duplicate || options.epsilons[j].priority == band.priority;
    if (duplicate) {
      diagnostics.error(at, "priority " + std::to_string(band.priority) + " is listed twice");
    } else if (!detail::validEpsilon(band.epsilon)) {
      diagnostics.error(at, formatNumber(band.epsilon) + " is outside (0.0, 0.5]");
    }
  }
}

HOLDBACK_INLINE Result<std::unique_ptr<ReservationPolicy>> ReservationPolicy::create(
    ReservationOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  if (diagnostics.hasErrors()) {
    return Result<std::unique_ptr<ReservationPolicy>>::failure(std::move(diagnostics));
  }
  return Result<std::unique_ptr<ReservationPolicy>>(
      std::unique_ptr<ReservationPolicy>(
          new ReservationPolicy(std::move(options), std::move(name))),
      std::move(diagnostics));
}

HOLDBACK_INLINE ReservationPolicy::ReservationPolicy(ReservationOptions options, std::string name)
    : UsageLimitPolicy(std::move(name)), options_(std::move(options)) {
  std::sort(options_.epsilons.begin(), options_.epsilons.end(),
            [](const ReservationEpsilon& x, const ReservationEpsilon& y) {
              return x.priority > y.priority;
            });
  band_z_.reserve(options_.epsilons.size());
  for (const auto& band : options_.epsilons) band_z_.push_back(inverseNormal(1.0 - band.epsilon));
  default_z_ = inverseNormal(1.0 - options_.epsilon);
  std::sort(options_.feedback.targets.begin(), options_.feedback.targets.end(),
            [](const ReservationWaitTarget& x, const ReservationWaitTarget& y) {
              return x.priority > y.priority;
            });
}

HOLDBACK_INLINE double ReservationPolicy::extraAt(std::size_t position,
                                                  Priority priority) const noexcept {
  if (!options_.feedback.enabled || position >= kMaxFeedbackBands) return 0.0;
  const FeedbackSlot& slot = feedback_[position];
  if (slot.priority.load(std::memory_order_relaxed) != priority) return 0.0;
  return slot.extra.load(std::memory_order_relaxed);
}

HOLDBACK_INLINE double ReservationPolicy::feedbackExtra(Priority priority) const noexcept {
  for (const FeedbackSlot& slot : feedback_) {
    if (slot.priority.load(std::memory_order_relaxed) == priority) {
      return slot.extra.load(std::memory_order_relaxed);
    }
  }
  return 0.0;
}

HOLDBACK_INLINE void ReservationPolicy::updateFeedback(std::span<const Priority> priorities,
                                                       const DemandView& demand) noexcept {
  const ReservationFeedback& fb = options_.feedback;
  if (!fb.enabled || demand.bands.size() != priorities.size() ||
      demand.now == std::chrono::steady_clock::time_point{}) {
    return;
  }
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(demand.now.time_since_epoch()).count();
  const std::int64_t last = last_feedback_ns_.load(std::memory_order_relaxed);
  if (last != kNoPriority) {
    // Not before one interval has passed; a clock that went back waits too. Unsigned arithmetic:
    // arbitrary timestamps (far apart, of either sign) must not overflow the difference.
    if (now_ns < last) return;
    const std::uint64_t since =
        static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(last);
    if (since < static_cast<std::uint64_t>(std::max<std::int64_t>(0, fb.interval.count()))) return;
  }
  bool expected = false;
  if (!feedback_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return;
  last_feedback_ns_.store(now_ns, std::memory_order_relaxed);
  const std::size_t n = std::min(priorities.size(), kMaxFeedbackBands);
  for (std::size_t i = 0; i < n; ++i) {
    FeedbackSlot& slot = feedback_[i];
    const Priority p = priorities[i];
    double extra = 0.0;
    if (slot.priority.load(std::memory_order_relaxed) == p) {
      extra = slot.extra.load(std::memory_order_relaxed);
    } else {
      extra = feedbackExtra(p);  // the band moved to another position, or is new (0)
      slot.priority.store(p, std::memory_order_relaxed);
    }
    // The band's target: an override or the default (binary search, targets highest first).
    std::chrono::nanoseconds target = fb.targetWait;
    const auto it =
        std::lower_bound(fb.targets.begin(), fb.targets.end(), p,
                         [](const ReservationWaitTarget& t, Priority q) { return t.priority > q; });
    if (it != fb.targets.end() && it->priority == p) target = it->wait;
    const double wait = demand.bands[i].waitP95;
    if (wait > std::chrono::duration<double>(target).count() && std::isfinite(wait)) {
      extra = std::min(fb.maxExtra, std::max(1.0, extra) * fb.increase);
    } else {
      extra = std::max(0.0, extra - fb.decrease);
    }
    slot.extra.store(extra, std::memory_order_relaxed);
  }
  feedback_busy_.store(false, std::memory_order_release);
}

HOLDBACK_INLINE void ReservationPolicy::epsilonFor(Priority priority, double& eps,
                                                   double& z) const noexcept {
  const auto& entries = options_.epsilons;
  std::size_t lo = 0;
  std::size_t hi = entries.size();
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (entries[mid].priority > priority) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < entries.size() && entries[lo].priority == priority) {
    eps = entries[lo].epsilon;
    z = band_z_[lo];
    return;
  }
  eps = options_.epsilon;
  z = default_z_;
}

HOLDBACK_INLINE void ReservationPolicy::reserves(std::span<const Priority> priorities,
                                                 const DemandView& demand,
                                                 std::span<double> out) const noexcept {
  using detail::finiteNonNegative;
  const std::size_t n = std::min(priorities.size(), out.size());
  if (n == 0) return;
  const bool have = demand.bands.size() >= n;
  // Suffix sums of the lower bands' lease-release rates (inFlight / holdingTime), so T_i is O(1).
  // Computed on the fly from the bottom: out[] holds the rates first, then the reserves.
  double release = 0.0;
  double completions = 0.0;  // measured completions per second, all bands
  double in_flight = 0.0;
  for (std::size_t i = n; i-- > 0;) {
    if (have) {
      const BandDemand& d = demand.bands[i];
      const double hold = finiteNonNegative(d.holdingTime);
      const double held = hold > 0.0 ? finiteNonNegative(d.inFlight) / hold : 0.0;
      release += held;
      // A view without completion rates (a host's own) falls back to inFlight / holdingTime.
      const double rate = finiteNonNegative(d.completionRate);
      completions += rate > 0.0 ? rate : held;
      in_flight += finiteNonNegative(d.inFlight);
    }
    out[i] = release;  // release rate of bands i..n-1
  }
  // A replica's share of the pool's completions, when the caller gives it (DemandView).
  if (demand.completionRate >= 0.0 && std::isfinite(demand.completionRate)) {
    completions = demand.completionRate;
  }
  // The turnover M of a full pool: capacity (1 / u requests) x the measured completions per
  // in-flight request; the measured completion rate when the capacity is unknown.
  double unit = demand.requestUnit;
  if (!(unit > 0.0 && std::isfinite(unit))) unit = options_.requestUnit.value_or(0.0);
  const double total_release =
      unit > 0.0 && in_flight > 0.0 ? completions / in_flight / unit : completions;
  double occupancy = 0.0;
  double arrivals = 0.0;
  double extras = 0.0;  // feedback extras of the bands above
  const double horizon = options_.refillHorizon
                             ? std::chrono::duration<double>(*options_.refillHorizon).count()
                             : -1.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double release_i = out[i];
    if (i == 0) {
      out[0] = 0.0;
    } else {
      double eps = 0.0;
      double z = 0.0;
      epsilonFor(priorities[i], eps, z);
      const double refill = horizon >= 0.0 ? horizon : (release_i > 0.0 ? 1.0 / release_i : 0.0);
      double r = 0.0;
      if (!options_.poissonSizing) {
        r = 0.0;
      } else if (options_.sizing == ReservationSizing::kRefill) {
        // Turnover unknown (nothing completed yet): protective (minCeiling) or the floors only.
        const double unknown = options_.protectiveStart ? INFINITY : 0.0;
        const double rho =
            total_release > 0.0 ? arrivals / total_release : (arrivals > 0.0 ? unknown : 0.0);
        r = refillReserve(rho, eps);
      } else {
        r = poissonReserve(occupancy, eps, z) + arrivals * refill;
      }
      const double share = unit > 0.0 ? options_.minReserveShare / unit : 0.0;
      out[i] = std::max({options_.minReserve, share, r}) + extras;
    }
    extras += extraAt(i, priorities[i]);
    if (have) {
      occupancy += finiteNonNegative(demand.bands[i].occupancy);
      arrivals += finiteNonNegative(demand.bands[i].arrivalRate);
    }
  }
}

HOLDBACK_INLINE void ReservationPolicy::holdReserves(std::span<const Priority> priorities,
                                                     const DemandView& demand, double unit,
                                                     bool endpoints,
                                                     std::span<double> reserves) noexcept {
  if (!options_.holdReserve || demand.now == std::chrono::steady_clock::time_point{}) return;
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(demand.now.time_since_epoch()).count();
  bool expected = false;
  const bool update = hold_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire);
  // Beyond this reserve the ceiling is minCeiling anyway; an infinite reserve decays from here.
  // (A denormal unit would make it infinite: then the largest finite double.)
  const double range = unit > 0.0 ? (1.0 - options_.minCeiling) / unit : 0.0;
  const double pooled_cap =
      unit > 0.0 && std::isfinite(range) ? range : std::numeric_limits<double>::max();
  const double decay = std::chrono::duration<double>(options_.smoothing.decay).count();
  const std::size_t n = std::min({priorities.size(), reserves.size(), kMaxFeedbackBands});
  // The in-flight cap needs the figures of every band above the one it caps.
  const bool have = demand.bands.size() >= n;
  double above = 0.0;  // requests in flight in the bands above band i
  for (std::size_t i = 1; i < n; ++i) {
    if (have) above += detail::finiteNonNegative(demand.bands[i - 1].inFlight);
    // Counted in room, a reserve beyond all of it (fits_i + 1) holds the band whatever it is.
    double cap = pooled_cap;
    if (endpoints && std::isfinite(demand.room[i].fits) && demand.room[i].fits >= 0.0) {
      cap = demand.room[i].fits + 1.0;
    }
    const double r = reserves[i] < cap ? reserves[i] : cap;  // NaN -> cap (protective)
    const Priority p = priorities[i];
    const HoldSlot* slot = &hold_[i];
    if (slot->priority.load(std::memory_order_relaxed) != p) {
      slot = nullptr;  // the band moved to another position, or is new
      for (const HoldSlot& other : hold_) {
        if (other.priority.load(std::memory_order_relaxed) == p) {
          slot = &other;
          break;
        }
      }
    }
    double held = r;
    if (slot != nullptr) {
      const double before = slot->held.load(std::memory_order_relaxed);
      const std::int64_t at = slot->at_ns.load(std::memory_order_relaxed);
      if (before > r) {
        // Time constant: the band's holding time, decayTime until one is measured. Unsigned
        // arithmetic: far-apart timestamps must not overflow; a clock that went back holds.
        const double hold = demand.bands.size() > i ? demand.bands[i].holdingTime : 0.0;
        const double tau = hold > 0.0 && std::isfinite(hold) ? hold : decay;
        const double dt = now_ns > at ? static_cast<double>(static_cast<std::uint64_t>(now_ns) -
                                                            static_cast<std::uint64_t>(at)) *
                                            1e-9
                                      : 0.0;
        held = r + (before - r) * std::exp(-dt / tau);
        if (!(held >= r)) held = r;  // NaN from bad stored figures: no hold
      }
    }
    // In-flight cap: what the hold keeps beyond R_i is for the bands above i; once they have
    // drained (their in-flight count below the held excess), it is released.
    if (have) held = std::min(held, r + above);
    if (update) {
      HoldSlot& mine = hold_[i];
      mine.priority.store(p, std::memory_order_relaxed);
      mine.held.store(held, std::memory_order_relaxed);
      mine.at_ns.store(now_ns, std::memory_order_relaxed);
    }
    // A lower band keeps at least the room held for the band above it (ceilings non-increasing).
    reserves[i] = std::max({held, reserves[i - 1], reserves[i]});  // a NaN last: not chosen
  }
  if (update) hold_busy_.store(false, std::memory_order_release);
}

HOLDBACK_INLINE std::optional<double> ReservationPolicy::roomCeiling(double saturation,
                                                                     const BandRoom& room,
                                                                     double reserve,
                                                                     double unit) const noexcept {
  if (std::isnan(room.fits) || std::isnan(room.fitsAfter) || std::isnan(reserve)) {
    return std::nullopt;
  }
  const double s = std::isfinite(saturation) && saturation > 0.0 ? saturation : 0.0;
  double w = unit > 0.0 && std::isfinite(unit) ? unit : 1.0 / 64.0;
  if (s < 1.0 && room.fits >= 1.0 && std::isfinite(room.fits)) w = (1.0 - s) / room.fits;
  if (!(w > 0.0)) w = 1.0 / 64.0;
  double c = 0.0;
  if (room.fitsAfter >= reserve) {
    c = s + (std::isfinite(room.fitsAfter - reserve) ? (room.fitsAfter - reserve + 1.0) * w
                                                     : options_.maxCeiling + 1.0);
  } else {
    c = s - (reserve - room.fitsAfter) * w;  // -infinity when it fits nowhere
  }
  return std::clamp(c, options_.minCeiling, options_.maxCeiling);
}

HOLDBACK_INLINE void ReservationPolicy::computeWithDemand(double saturation,
                                                          std::span<const Priority> priorities,
                                                          std::span<double> ceilings,
                                                          const DemandView& demand) noexcept {
  const std::size_t n = priorities.size();
  updateFeedback(priorities, demand);
  double unit = demand.requestUnit;
  if (!(unit > 0.0 && std::isfinite(unit))) unit = options_.requestUnit.value_or(0.0);
  const bool endpoints =
      options_.capacityModel == ReservationCapacity::kEndpoints && demand.room.size() >= n;
  if (!(unit > 0.0) && !endpoints) {
    for (std::size_t i = 0; i < n; ++i) ceilings[i] = options_.maxCeiling;
    return;
  }
  reserves(priorities, demand, ceilings);  // ceilings[i] = R_i for now
  holdReserves(priorities, demand, unit, endpoints, ceilings);
  for (std::size_t i = 0; i < n; ++i) {
    double c = options_.maxCeiling;
    if (i > 0) {
      std::optional<double> by_room;
      if (endpoints) by_room = roomCeiling(saturation, demand.room[i], ceilings[i], unit);
      if (by_room) {
        c = *by_room;
      } else if (unit > 0.0) {
        c = 1.0 - ceilings[i] * unit;
      }
    }
    ceilings[i] = std::clamp(c, options_.minCeiling, options_.maxCeiling);
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
