// Implementation of holdback/flow/plugins/vtc_fairness.hpp (compiled by src/flow.cpp, or
// included by the header itself in header-only mode).
#pragma once

#include "holdback/flow/plugins/vtc_fairness.hpp"

#include "holdback/flow/detail/vtc_fairness_fields.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "holdback/core/text.hpp"
#include "holdback/flow/detail/flat_index.hpp"
#include "holdback/flow/detail/intrusive_treap.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// A flow's counter and its node in its band's treap (linked while the flow is non-empty).
struct VtcFairnessPolicy::FlowState final : FairnessFlowState {
  FlowState(BandState* owner, const FlowQueueView* view, std::uint64_t treap_rank)
      : band(owner), flow(view), id(view->flowId()), rank(treap_rank) {}
  ~FlowState() override;
  FlowState(const FlowState&) = delete;
  FlowState& operator=(const FlowState&) = delete;
  [[nodiscard]] bool before(const FlowState& o) const noexcept {
    if (counter != o.counter) return counter < o.counter;
    return id < o.id;
  }
  struct Rank {
    static std::uint64_t of(const FlowState* s) noexcept { return s->rank; }
  };

  BandState* band;
  const FlowQueueView* flow;
  std::string_view id;  // flow->flowId(), stable while the flow lives
  std::uint64_t rank;
  double counter = 0.0;
  bool linked = false;
  FlowState* parent = nullptr;
  FlowState* left = nullptr;
  FlowState* right = nullptr;
};

struct VtcFairnessPolicy::BandState final : FairnessState {
  detail::IntrusiveTreap<FlowState, FlowState::Rank> active;  // non-empty flows by (counter, id)
  double last_picked = 0.0;  // the counter of the flow picked last (the lift with no active flow)
  std::uint64_t next_rank = 0;
  // The pick's charge, applied when the picked head leaves its queue (headChanged, right after
  // the pick in the same cycle): one re-key instead of two when the flow then runs empty. In the
  // rare cycle that gives up after its pick (too many dead heads) the charge waits for the next
  // pick, which replaces it, or for that head to leave.
  FlowState* pending = nullptr;
  double pending_cost = 0.0;

  void link(FlowState* s) noexcept {
    s->linked = true;
    active.insertWith(s, [s](const FlowState* other) { return s->before(*other); });
  }
  void unlink(FlowState* s) noexcept {
    active.erase(s);
    s->linked = false;
  }
};

// Flows are destroyed before their band's state (Band declares fairness_state before flows).
HOLDBACK_INLINE VtcFairnessPolicy::FlowState::~FlowState() {
  if (linked) band->unlink(this);
  if (band->pending == this) band->pending = nullptr;
}

HOLDBACK_INLINE Result<std::unique_ptr<VtcFairnessPolicy>> VtcFairnessPolicy::create(
    VtcFairnessOptions options) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<VtcFairnessPolicy>>(std::move(diagnostics), [&] {
    return std::unique_ptr<VtcFairnessPolicy>(new VtcFairnessPolicy(options));
  });
}

HOLDBACK_INLINE void VtcFairnessPolicy::validate(const VtcFairnessOptions& o,
                                                 const std::string& path, Diagnostics& d) {
  checkFields<VtcFairnessOptions>(kVtcFairnessFields, o, path, d);
}

HOLDBACK_INLINE std::unique_ptr<FairnessState> VtcFairnessPolicy::newState() const {
  return std::make_unique<BandState>();
}

HOLDBACK_INLINE std::unique_ptr<FairnessFlowState> VtcFairnessPolicy::newFlowState(
    const FlowQueueView& flow, FairnessState* bandState) const {
  auto* band = dynamic_cast<BandState*>(bandState);
  if (band == nullptr) return nullptr;  // not this policy's band state: pick() degrades
  // Treap ranks: splitmix64's output over a per-band counter.
  return std::make_unique<FlowState>(band, &flow,
                                     detail::mix64(band->next_rank += 0x9e3779b97f4a7c15ull));
}

HOLDBACK_INLINE void VtcFairnessPolicy::headChanged(const FlowQueueView& flow,
                                                    FairnessFlowState& flowState) const noexcept {
  auto& s = static_cast<FlowState&>(flowState);  // made by newFlowState
  BandState& b = *s.band;
  const bool charged = b.pending == &s;
  if (charged) b.pending = nullptr;
  if (flow.size() == 0) {
    if (s.linked) b.unlink(&s);
    if (charged) s.counter += b.pending_cost;
    return;
  }
  if (s.linked) {  // the key does not depend on the head, only on the charge
    if (charged) {
      b.unlink(&s);
      s.counter += b.pending_cost;
      b.link(&s);
    }
    return;
  }
  if (charged) s.counter += b.pending_cost;
  const FlowState* lowest = b.active.front();
  s.counter = std::max(s.counter, lowest != nullptr ? lowest->counter : b.last_picked);
  b.link(&s);
}

HOLDBACK_INLINE const FlowQueueView* VtcFairnessPolicy::pick(const BandView& band,
                                                             FairnessState* state) const noexcept {
  auto* b = dynamic_cast<BandState*>(state);
  if (b == nullptr || b->active.empty()) return band.firstActiveFlow();  // degraded: by id
  FlowState* s = b->active.front();
  const QueuedRequestView* head = s->flow->head();
  const double tokens =
      head != nullptr && head->kvTokens > 0 ? static_cast<double>(head->kvTokens) : 0.0;
  b->last_picked = s->counter;
  b->pending = s;  // charged when the head leaves (headChanged)
  b->pending_cost = options_.requestCost + options_.tokenWeight * tokens;
  return s->flow;
}

HOLDBACK_INLINE std::shared_ptr<const FairnessPolicy> vtcFairness() {
  static const std::shared_ptr<const FairnessPolicy> instance =
      std::move(VtcFairnessPolicy::create()).value();
  return instance;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
