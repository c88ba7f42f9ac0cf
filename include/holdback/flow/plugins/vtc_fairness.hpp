// vtc-fairness-policy: token-count fairness within a band, after the virtual token counter (VTC)
// of Sheng et al., "Fairness in Serving Large Language Models" (OSDI 2024); upstream's proposal
// is llm-d-router issue #1182.
//
// The algorithm
//   Every flow of a band has a virtual counter of the service it was given. pick() returns the
//   non-empty flow with the smallest counter (equal counters: the smaller flow id, byte-wise) and
//   charges it for the request at its head, which is the request the cycle dispatches:
//       cost = requestCost + tokenWeight x max(head.kvTokens, 0)
//   head.kvTokens is the request's declared footprint (FlowRequest::kvTokens: input + expected
//   output tokens). A flow that becomes non-empty (new, or back after its queue ran dry) has its
//   counter lifted to the smallest counter of the band's other non-empty flows (to the counter
//   of the flow picked last while there are none), so an idle flow cannot bank credit and then
//   take a burst of dispatches; a busy flow is never lowered.
//
// What it measures
//   The declared footprint at dispatch, once. The paper weighs input and output tokens apart
//   (w_p x input + w_q x output) and counts output as it is generated; holdback's request
//   declares one figure (input + expected output) and the fairness layer sees no completion, so
//   the two weights are one (tokenWeight) and nothing is corrected afterwards. A request that
//   declares nothing costs requestCost alone (with tokenWeight 0 the policy is request-count
//   fair). A head found dead after its pick (TTL run out: evicted by the cycle, which picks
//   again) is charged all the same, as round-robin's cursor advances on a pick that fails.
//
// Fairness bound (the paper's argument): the picked flow has the smallest counter and grows by
// one cost, so once two flows that stay non-empty have each been picked, their counters differ
// by at most the largest single cost C: over any interval their served weighted tokens differ
// by at most 2C.
//
// Cost: pick O(log F) expected (the band's non-empty flows in a treap by (counter, id), its
// nodes the flows' states: no allocation); headChanged O(log F) when a flow becomes empty or
// non-empty, O(1) otherwise. Counters are doubles: they stay exact integers up to 2^53 weighted
// tokens per band.
//
// Thread safety: thread-safe. The instance is immutable; the counters live in the per-band and
// per-flow states, which the controller only touches under its lock (so one instance may serve
// several bands and controllers).
#pragma once

#include "holdback/abi.hpp"

#include <memory>
#include <string>
#include <string_view>

#include "holdback/core/diagnostics.hpp"
#include "holdback/flow/fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct VtcFairnessOptions {
  // Charged for every dispatched request, in tokens; > 0 and <= 1e9.
  double requestCost = 1.0;
  // Weight of a declared footprint token; >= 0 and <= 1e6.
  double tokenWeight = 1.0;
};

class HOLDBACK_API VtcFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "vtc-fairness-policy";

  static Result<std::unique_ptr<VtcFairnessPolicy>> create(VtcFairnessOptions options = {});
  // Appends one error per invalid field; `path` is the JSON pointer of the parameters object.
  static void validate(const VtcFairnessOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] const VtcFairnessOptions& options() const noexcept { return options_; }
  [[nodiscard]] std::unique_ptr<FairnessState> newState() const override;
  [[nodiscard]] std::unique_ptr<FairnessFlowState> newFlowState(
      const FlowQueueView& flow, FairnessState* bandState) const override;
  void headChanged(const FlowQueueView& flow, FairnessFlowState& flowState) const noexcept override;
  [[nodiscard]] const FlowQueueView* pick(const BandView& band,
                                          FairnessState* state) const noexcept override;
  struct BandState;
  struct FlowState;

 private:
  explicit VtcFairnessPolicy(VtcFairnessOptions options) : options_(options) {}
  const VtcFairnessOptions options_;
};

// A shared instance with the default options.
[[nodiscard]] HOLDBACK_API std::shared_ptr<const FairnessPolicy> vtcFairness();

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/plugins/vtc_fairness-inl.hpp"
#endif
