// Band scheduling: which priority band the dispatch cycle serves first (the top tier of the
// flow controller's three-tier choice: band -> fairness -> ordering).
//
//   strict-priority (default)   the highest band with a request its fairness policy offers, as
//                               the Go reference's dispatch cycle. Under sustained load in a high
//                               band a lower band is never served.
//   weighted-fair               saturation-activated weighted fair queuing across bands (the
//                               proposal of llm-d-router issue #1995, its "interleaved"
//                               schedule): strict priority while the pool's saturation is below
//                               activationThreshold; at or above it, the dispatch opportunities
//                               are shared among the bands by weight.
//
// The algorithm (weighted-fair)
//   A cycle is active when s >= activationThreshold (s: the cycle's effective saturation; NaN is
//   never active). In an active cycle the candidate bands are the non-empty bands of the cycle's
//   priority domain ABOVE the first band the usage-limit policy gates (isGated(s, ceiling)): the
//   same bands strict priority could reach in that cycle. WFQ only reorders them; it never serves
//   a gated band nor a band below one, so the ceilings stay the safety mechanism (head-of-line
//   blocking is unchanged; a band starved by its ceiling stays starved, by design).
//   Stride scheduling in virtual time: band i has weight w_i, stride S / w_i (S = 2^48, integer)
//   and a pass p_i. The candidates are tried in ascending pass (equal passes: higher band first);
//   the first one whose fairness policy yields a live request dispatches and its pass grows by
//   its stride. The virtual time V is the largest pass a band had when it dispatched; at the
//   start of every active cycle each candidate's pass is lifted to at least V, so a band that was
//   empty, gated or outside the domain cannot bank credit and then monopolize the pool. Passes
//   change only in active cycles (strict cycles leave them as they are).
//
// Weights
//   A band's `weight` (BandOptions / BandTemplate) in [1, 1e6]; 0 (the default) derives it from
//   the band's position in the cycle's priority domain, linearly: the lowest band 1, the next 2,
//   ..., the highest n (upstream's "linear" distribution). Only ratios matter.
//
// The starvation bound
//   While every cycle is active and band i stays a candidate whose fairness policy offers a
//   request, between two consecutive dispatches from band i at most
//   sum over the other candidate bands j of (ceil(w_j / w_i) + 1) dispatches go to other bands:
//   band i gets at least one dispatch in every K_i = 1 + sum_j (ceil(w_j / w_i) + 1) consecutive
//   dispatches (wfqStarvationBound). Why: a band j dispatches before i only with p_j <= p_i, and
//   when i last dispatched every candidate's pass (lifted to V) was at least p_i - S / w_i, so j
//   fits at most floor(stride_i / stride_j) + 1 <= ceil(w_j / w_i) + 1 dispatches in between.
//   Dispatches of strict (inactive) cycles are not counted. Over a long run of active cycles
//   with every band backlogged, band i's share of the dispatches tends to w_i / sum_j w_j.
//
// Thread safety: plain values and pure functions (thread-safe).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <span>
#include <string>

#include "holdback/core/diagnostics.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

enum class BandSchedule {
  kStrictPriority,
  kWeightedFair,
};

// Config spellings: "strict-priority", "weighted-fair".
[[nodiscard]] constexpr std::string_view toString(BandSchedule s) noexcept {
  return s == BandSchedule::kWeightedFair ? "weighted-fair" : "strict-priority";
}

inline constexpr double kDefaultBandActivationThreshold = 0.8;
// A band weight of 0 derives it; explicit weights lie in [kMinBandWeight, kMaxBandWeight].
inline constexpr double kMinBandWeight = 1.0;
inline constexpr double kMaxBandWeight = 1'000'000.0;

struct BandSchedulingOptions {
  BandSchedule schedule = BandSchedule::kStrictPriority;
  // In [0, 1): weighted-fair is active in the cycles whose saturation is at least this.
  double activationThreshold = kDefaultBandActivationThreshold;
};

// K_i of the bound above: `weights` are the candidate bands' weights (each >= 1), `band` the
// index of band i in it. 0 when `band` is out of range. Saturates at SIZE_MAX.
[[nodiscard]] HOLDBACK_API std::size_t wfqStarvationBound(std::span<const double> weights,
                                                          std::size_t band) noexcept;

// Errors (with `path`, e.g. "/bandScheduling") for a threshold outside [0, 1) or NaN.
HOLDBACK_API void validateBandScheduling(const BandSchedulingOptions& options,
                                         const std::string& path, Diagnostics& diagnostics);
// Errors for a band weight that is neither 0 nor in [1, 1e6] (NaN included); `path` names it.
HOLDBACK_API void validateBandWeight(double weight, const std::string& path,
                                     Diagnostics& diagnostics);

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/band_scheduling-inl.hpp"
#endif
