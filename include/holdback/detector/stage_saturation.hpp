// Stage-aware saturation for disaggregated (prefill/decode) pools.
//
// The algorithm (the Go reference's stage-aware saturation, llm-d-router PR #2221,
// https://github.com/llm-d/llm-d-router)
//   Endpoints are partitioned by role: prefill and encode-prefill go to the prefill stage; decode
//   (and unlabeled) to the decode stage; prefill-decode and encode-prefill-decode (interleaved) to
//   both; encode and unknown roles to neither. The detector is evaluated once per non-empty stage
//   (prefill first, then decode) and the effective saturation is the maximum. An empty stage
//   contributes nothing (so an empty prefill set does not add the detector's empty-pool 1.0).
//   When both stages are empty the detector is evaluated on the whole list (an empty pool then
//   reads the detector's empty-pool value, 1.0 for the built-in detectors).
//   Fast path: when every endpoint is in the decode stage only (a monolithic pool), the detector
//   is called once on the caller's span, with no copy.
//
// Thread safety: thread-compatible (the evaluator owns scratch buffers; use one per thread, e.g.
// one per flow controller). evaluate() does not allocate once the scratch buffers have grown to
// the pool's size, and does not throw.
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <span>
#include <vector>

#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct StageSaturation {
  double effective = 1.0;
  std::optional<double> prefill;  // set when the prefill stage was evaluated
  std::optional<double> decode;   // set when the decode stage was evaluated
};

// Which stages an endpoint of `role` belongs to.
[[nodiscard]] constexpr bool inPrefillStage(EndpointRole role) noexcept {
  return role == EndpointRole::kPrefill || role == EndpointRole::kEncodePrefill ||
         role == EndpointRole::kPrefillDecode || role == EndpointRole::kEncodePrefillDecode;
}
[[nodiscard]] constexpr bool inDecodeStage(EndpointRole role) noexcept {
  return role == EndpointRole::kDecode || role == EndpointRole::kPrefillDecode ||
         role == EndpointRole::kEncodePrefillDecode;
}

class HOLDBACK_API StageSaturationEvaluator {
 public:
  StageSaturation evaluate(const SaturationDetector& detector, std::span<const Endpoint> endpoints,
                           TimePoint now) noexcept;

 private:
  std::vector<Endpoint> prefill_;
  std::vector<Endpoint> decode_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/stage_saturation-inl.hpp"
#endif
