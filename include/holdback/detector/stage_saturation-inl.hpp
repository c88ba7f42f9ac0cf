// Implementation of holdback/detector/stage_saturation.hpp: compiled into libholdback by
// src/stage_saturation.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/detector/stage_saturation.hpp"

#include <algorithm>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Copies the endpoints selected by `keep` into `out`, reusing its elements' storage.
template <class Keep>
std::size_t collect(std::span<const Endpoint> endpoints, std::vector<Endpoint>& out, Keep keep) {
  std::size_t n = 0;
  for (const Endpoint& e : endpoints) {
    if (!keep(e.role)) continue;
    if (n < out.size()) {
      out[n] = e;
    } else {
      out.push_back(e);
    }
    ++n;
  }
  return n;
}

}  // namespace detail

HOLDBACK_INLINE StageSaturation
StageSaturationEvaluator::evaluate(const SaturationDetector& detector,
                                   std::span<const Endpoint> endpoints, TimePoint now) noexcept {
  StageSaturation out;
  const bool monolithic = std::all_of(endpoints.begin(), endpoints.end(), [](const Endpoint& e) {
    return e.role == EndpointRole::kDecode;
  });
  if (monolithic) {
    out.effective = detector.saturation(endpoints, now);
    if (!endpoints.empty()) out.decode = out.effective;
    return out;
  }
  // Growing the scratch buffers may allocate (only until they reach the pool's size). Should that
  // allocation fail, fail closed: report the pool as saturated.
  std::size_t prefill_count = 0;
  std::size_t decode_count = 0;
  HOLDBACK_TRY {
    prefill_count = detail::collect(endpoints, prefill_, inPrefillStage);
    decode_count = detail::collect(endpoints, decode_, inDecodeStage);
  }
  HOLDBACK_CATCH_ALL {
    out.effective = 1.0;
    return out;
  }
  if (prefill_count > 0) {
    out.prefill =
        detector.saturation(std::span<const Endpoint>(prefill_.data(), prefill_count), now);
  }
  if (decode_count > 0) {
    out.decode = detector.saturation(std::span<const Endpoint>(decode_.data(), decode_count), now);
  }
  if (!out.prefill && !out.decode) {
    out.effective = detector.saturation(endpoints, now);
  } else {
    out.effective = std::max(out.prefill.value_or(0.0), out.decode.value_or(0.0));
  }
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
