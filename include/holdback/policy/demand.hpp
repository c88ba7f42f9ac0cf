// Demand per priority band, measured by the flow controller and handed to usage-limit policies
// that size their holdback from it (the reservation policy, policy/reservation.hpp).
//
// The figures
//   For every band the controller knows arrivals (enqueue), dispatches, completions (the host
//   ends a dispatched request's lease) and the queue. Once per dispatch cycle it folds them into
//   a BandDemand through a DemandEstimator:
//     occupancy    requests the band holds (in flight + queued), smoothed with fast attack and
//                  slow decay: Little's a = lambda x E[S] when the band is not queueing;
//     arrivalRate  requests per second, a short symmetric average of the arrival counts (so one
//                  arrival in a 1 ms cycle is not read as 1000 req/s), then fast attack / slow
//                  decay (two filters: a step in the rate is 80 % seen after 3 rise times, 96 %
//                  after 5);
//     holdingTime  seconds a dispatched request holds its slot, an average over completions
//                  (0 until the first completion);
//     completionRate  leases ended per second, a symmetric average over `decay` (starts at 0:
//                  the turnover is learnt, not assumed; free of the inspection bias of
//                  holdingTime, whose first samples are the shortest requests);
//     waitP95      seconds, an approximate 95th percentile of the queue wait of the band's recent
//                  dispatches: an exponentially weighted mean plus twice the weighted mean absolute
//                  deviation (about the p95 of a normal wait; cheap and allocation-free);
//     inFlight, queued  the instantaneous counts;
//     footprintTokens  the KV tokens a request of the band holds (input + expected output, as
//                  the host declares them at enqueue), an average over arrivals (0 until one
//                  declared a footprint).
//   Fast attack, slow decay: a rising sample moves the estimate with time constant `rise`, a
//   falling one with `decay` (both configurable; defaults 0.3 s and 5 s). A burst is seen within a
//   few hundred milliseconds; a lull does not drop the reserve at once.
//   Rise significance (DemandSmoothing::riseSignificance, z; 0 = off, the default): arrivals are
//   Poisson noise around their rate, and a filter that follows every rise at once and every fall
//   slowly sits above the rate, towards the noise's upper envelope. With z > 0 the estimate
//   follows the short average (over `rise`) only while it exceeds the long one (a symmetric
//   average over `decay`) by more than z standard deviations of that noise,
//   sqrt(long / (2 rise)); otherwise it follows the long average. A burst's onset is still seen
//   within a few rise times (its rate is many deviations above the lull's). Mean estimate of a
//   steady Poisson stream with rise 150 ms and decay 1 s, as a multiple of its rate (z = 0 /
//   1.5 / 3): 1.27 / 1.17 / 1.06 at 24 req/s, 1.13 / 1.07 / 1.04 at 100 req/s, 1.90 / 1.84 /
//   1.08 at 1 req/s (tests/policy/demand_noise_test.cpp).
//
// Bad input: a non-finite, zero or negative dt leaves the estimate unchanged; negative or
// non-finite counts read as 0; a negative or non-finite holding time is ignored. Nothing here
// allocates or throws.
//
// Thread safety: BandDemand and DemandView are plain values. DemandEstimator is
// thread-compatible (the controller updates it under its own lock).
#pragma once

#include "holdback/abi.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "holdback/core/capacity.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct BandDemand {
  double occupancy = 0.0;        // smoothed in-flight + queued requests
  double arrivalRate = 0.0;      // smoothed arrivals per second
  double holdingTime = 0.0;      // smoothed seconds per dispatched request; 0 = not measured yet
  double inFlight = 0.0;         // instantaneous
  double queued = 0.0;           // instantaneous
  double waitP95 = 0.0;          // approximate p95 queue wait (seconds) of recent dispatches
  double completionRate = 0.0;   // leases ended per second, averaged over `decay`
  double footprintTokens = 0.0;  // mean KV tokens per request (input + expected output); 0 = none
};

// What a demand-aware policy receives besides saturation and priorities. `bands` is aligned with
// the priorities span (band i's demand at index i) or empty when no demand is known (a caller
// that does not measure it, such as `holdback ceilings` without demand figures).
struct DemandView {
  std::span<const BandDemand> bands;
  // Saturation units per in-flight request: how much of the pool one request occupies. The
  // controller reports saturation / total in-flight (upstream's mean-footprint credit), which is
  // 1 / maxConcurrency for the concurrency detector. NaN when unknown (nothing in flight yet).
  double requestUnit = std::numeric_limits<double>::quiet_NaN();
  // The caller's clock at this computation (for policies with feedback state); epoch = unknown.
  std::chrono::steady_clock::time_point now{};
  // Aligned with `bands` (band i's at index i), or empty when unknown: the pool's room for the
  // requests above band i, in whole requests of their footprint that fit on some endpoint, and
  // what is left of it once one request of band i is placed (holdback/core/capacity.hpp). The
  // controller fills it when its detector reports per-endpoint room.
  std::span<const BandRoom> room;
  // The completions per second a demand-aware policy measures the pool's turnover from, when the
  // caller knows it better than the bands' sum: a gateway replica sharing the pool with others
  // (ReplicaPort::setShare) passes the pool's completions divided by the replicas.
  // Its own bands' completions are not the pool's turnover: they fall to nothing while the other
  // replicas hold the room, and a policy sizing from them reads the pool as not turning over
  // and holds every lower band back, which keeps their completions at nothing. NaN (the
  // default), negative or infinite: the bands' completion rates are summed.
  double completionRate = std::numeric_limits<double>::quiet_NaN();
};

struct DemandSmoothing {
  std::chrono::nanoseconds rise = std::chrono::milliseconds(300);
  std::chrono::nanoseconds decay = std::chrono::seconds(5);
  // Completions whose holding times are averaged (EWMA weight 1 / holdingSamples).
  double holdingSamples = 32.0;
  // Dispatches whose queue waits are averaged for waitP95 (EWMA weight 1 / waitSamples).
  double waitSamples = 64.0;
  // Arrivals whose declared KV footprints are averaged for footprintTokens (EWMA weight
  // 1 / footprintSamples).
  double footprintSamples = 32.0;
  // z of the rise significance test (see the file comment); 0 = every rise is followed. >= 0.
  double riseSignificance = 0.0;

  friend bool operator==(const DemandSmoothing&, const DemandSmoothing&) = default;
};

// Folds one band's raw counts into a BandDemand (see the file comment).
class DemandEstimator {
 public:
  explicit DemandEstimator(DemandSmoothing smoothing = {}) noexcept : smoothing_(smoothing) {}

  // One step: `arrivals` since the previous step, the current counts, `dt` seconds since the
  // previous step; `burstSignificance` > 0 follows bursts (inBurst), 0 does not.
  void update(double dtSeconds, double arrivals, double inFlight, double queued,
              double burstSignificance = 0.0) noexcept {
    inFlight = sanitizeCount(inFlight);
    queued = sanitizeCount(queued);
    arrivals = sanitizeCount(arrivals);
    demand_.inFlight = inFlight;
    demand_.queued = queued;
    if (!(dtSeconds > 0.0) || !std::isfinite(dtSeconds)) return;
    const double rise = seconds(smoothing_.rise);
    const double decay = seconds(smoothing_.decay);
    // Arrival rate: a symmetric average over `rise` first (and one over `decay`), then the
    // asymmetric filter, fed the short average or, when its rise is not significant, the long one.
    const double decay_alpha = alpha(dtSeconds, decay);  // the symmetric averages over `decay`
    rate_fast_ += alpha(dtSeconds, rise) * (arrivals / dtSeconds - rate_fast_);
    rate_slow_ += decay_alpha * (arrivals / dtSeconds - rate_slow_);
    double rate = rate_fast_;
    const double z = smoothing_.riseSignificance;
    if (z > 0.0 && rise > 0.0) {
      const double noise = std::sqrt(rate_slow_ / (2.0 * rise));
      if (!(rate_fast_ > rate_slow_ + z * noise)) rate = rate_slow_;
    }
    followBurst(burstSignificance, dtSeconds, arrivals / dtSeconds, rise, decay);
    demand_.arrivalRate = asymmetric(demand_.arrivalRate, rate, dtSeconds, rise, decay);
    demand_.occupancy = asymmetric(demand_.occupancy, inFlight + queued, dtSeconds, rise, decay);
    demand_.completionRate += decay_alpha * (completions_ / dtSeconds - demand_.completionRate);
    completions_ = 0.0;
  }

  // A dispatched request of this band ended after holding its slot `seconds`.
  void completed(double holdSeconds) noexcept {
    completions_ += 1.0;
    if (!(holdSeconds >= 0.0) || !std::isfinite(holdSeconds)) return;
    if (demand_.holdingTime <= 0.0) {
      demand_.holdingTime = holdSeconds;
      return;
    }
    const double w = smoothing_.holdingSamples >= 1.0 ? 1.0 / smoothing_.holdingSamples : 1.0;
    demand_.holdingTime += w * (holdSeconds - demand_.holdingTime);
  }

  // A request of this band arrived declaring a KV footprint of `tokens` (input + expected
  // output). Zero, negative or non-finite: no footprint declared (ignored).
  void arrivedWithFootprint(double tokens) noexcept {
    if (!(tokens > 0.0) || !std::isfinite(tokens)) return;
    if (demand_.footprintTokens <= 0.0) {
      demand_.footprintTokens = tokens;
      return;
    }
    const double w = smoothing_.footprintSamples >= 1.0 ? 1.0 / smoothing_.footprintSamples : 1.0;
    demand_.footprintTokens += w * (tokens - demand_.footprintTokens);
  }

  // A request of this band was dispatched after waiting `waitSeconds` in the queue.
  void dispatched(double waitSeconds) noexcept {
    if (!(waitSeconds >= 0.0) || !std::isfinite(waitSeconds)) return;
    const double w = smoothing_.waitSamples >= 1.0 ? 1.0 / smoothing_.waitSamples : 1.0;
    if (wait_samples_ == 0) {
      wait_mean_ = waitSeconds;
    } else {
      wait_mean_ += w * (waitSeconds - wait_mean_);
      wait_dev_ += w * (std::fabs(waitSeconds - wait_mean_) - wait_dev_);
    }
    ++wait_samples_;
    demand_.waitP95 = wait_mean_ + 2.0 * wait_dev_;
  }

  [[nodiscard]] const BandDemand& demand() const noexcept { return demand_; }
  [[nodiscard]] const DemandSmoothing& smoothing() const noexcept { return smoothing_; }
  // The base's averaging time in decay times (60 s with decay 1 s), and how many standard
  // deviations above it a burst lasts (inBurst).
  static constexpr double kBurstBaseDecays = 60.0;
  static constexpr double kBurstEndSignificance = 1.5;
  // Whether the band is in a burst (updates with burstSignificance z_b > 0; false otherwise). The
  // base is the arrivals' average over kBurstBaseDecays decay times: the rate before a burst. A
  // burst starts when the short average of the arrivals (over `rise`) exceeds the long one (over
  // `decay`) by more than z_b standard deviations of their noise, sqrt(long / (2 rise)), and
  // lasts while either average stays above the base by more than kBurstEndSignificance deviations
  // of the base's noise (the base counted at one arrival per `decay` at least): the rate moved to
  // a new level, not one cluster of arrivals. A lasting level (the traffic's start from nothing
  // too) ends its burst once the base has followed it, within about kBurstBaseDecays decay times.
  [[nodiscard]] bool inBurst() const noexcept { return burst_; }

 private:
  static double sanitizeCount(double v) noexcept { return v > 0.0 && std::isfinite(v) ? v : 0.0; }
  static double seconds(std::chrono::nanoseconds d) noexcept {
    return std::chrono::duration<double>(d).count();
  }
  static double alpha(double dt, double tau) noexcept {
    return tau > 0.0 ? 1.0 - std::exp(-dt / tau) : 1.0;
  }
  static double asymmetric(double value, double sample, double dt, double rise,
                           double decay) noexcept {
    return value + alpha(dt, sample > value ? rise : decay) * (sample - value);
  }
  void followBurst(double z, double dt, double arrivalsPerSecond, double rise,
                   double decay) noexcept {
    if (!(z > 0.0) || !(rise > 0.0) || !(decay > 0.0)) {
      burst_ = false;
      return;
    }
    // The base: the arrivals' average over kBurstBaseDecays decay times, the rate before a burst.
    burst_base_ += alpha(dt, kBurstBaseDecays * decay) * (arrivalsPerSecond - burst_base_);
    const double base = std::max(burst_base_, 1.0 / decay);
    const double z_end = kBurstEndSignificance;
    const bool above = rate_slow_ > burst_base_ + z_end * std::sqrt(base / (2.0 * decay)) ||
                       rate_fast_ > burst_base_ + z_end * std::sqrt(base / (2.0 * rise));
    if (burst_) {
      burst_ = above;
    } else {
      burst_ = above && rate_fast_ > rate_slow_ + z * std::sqrt(rate_slow_ / (2.0 * rise));
    }
  }

  DemandSmoothing smoothing_;
  BandDemand demand_;
  double rate_fast_ = 0.0;
  double rate_slow_ = 0.0;
  double completions_ = 0.0;  // since the previous update
  double burst_base_ = 0.0;   // the arrivals' average over kBurstBaseDecays decay times
  bool burst_ = false;
  double wait_mean_ = 0.0;
  double wait_dev_ = 0.0;
  std::uint64_t wait_samples_ = 0;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
