// Fairness (which flow of a band dispatches next) and ordering (which request of a flow goes
// first): the two lower tiers of the flow controller's three-tier choice (priority band ->
// fairness -> ordering, as the Go reference's dispatch cycle and its plugins under
// pkg/epp/framework/plugins/flowcontrol/ in llm-d-router, https://github.com/llm-d/llm-d-router).
//
//   fcfs            OrderingPolicy: earlier enqueue time first (exact: equal times fall back to
//                   the controller's arrival sequence, so FCFS is a strict FIFO across a flow).
//   edf             OrderingPolicy: earlier deadline first; deadline = enqueueTime + effectiveTtl,
//                   no TTL = after every timed request; equal deadlines -> earlier enqueue time.
//   global-strict   FairnessPolicy: the flow whose head goes first by the band's ordering policy
//                   (the band behaves as one logical queue; no isolation between flows). O(1).
//   round-robin     FairnessPolicy: non-empty flows in byte-wise ascending flow-id order, starting
//                   after the flow picked last and wrapping around. O(log F).
//
// A host may implement its own policies. The controller calls them under its internal lock, so
// they must not block, allocate in steady state, throw, or call back into the controller. The
// controller always breaks ordering ties by the arrival sequence, so less() only needs to be a
// strict weak ordering.
//
// Thread safety: thread-safe (the built-in policies are immutable; per-band mutable state lives
// in a FairnessState that the controller only touches under its lock).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "holdback/detector/saturation_detector.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// What an ordering policy may look at.
struct QueuedRequestView {
  std::string_view flowId;
  Priority priority = 0;  // the band the request is queued in
  std::uint64_t sizeBytes = 0;
  TimePoint enqueueTime{};
  // The saturation-regime TTL budget (clamped to the caller deadline); zero = none.
  Duration effectiveTtl{0};
  // The caller's deadline, if any.
  std::optional<TimePoint> deadline;
  // Arrival order at the controller, unique and increasing.
  std::uint64_t sequence = 0;
  // When the host received the request (FlowRequest::receivedTime; the enqueue time if unset).
  TimePoint receivedTime{};
  // The request's time-to-first-token objective (FlowRequest::ttftObjective), if any.
  std::optional<Duration> ttftObjective;
  // Its declared footprint (FlowRequest::kvTokens: input + expected output tokens); <= 0 = none.
  std::int64_t kvTokens = 0;
};

// Thread safety: implementations must be thread-safe (one instance may serve many bands and
// controllers; calls come under each controller's lock).
class HOLDBACK_API OrderingPolicy {
 public:
  virtual ~OrderingPolicy() = default;
  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  // True when `a` must be dispatched before `b`. A strict weak ordering; ties are broken by
  // sequence by the controller.
  [[nodiscard]] virtual bool less(const QueuedRequestView& a,
                                  const QueuedRequestView& b) const noexcept = 0;
};

// Thread safety: thread-safe (stateless).
class HOLDBACK_API FcfsOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "fcfs-ordering-policy";
  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] bool less(const QueuedRequestView& a,
                          const QueuedRequestView& b) const noexcept override {
    return a.enqueueTime < b.enqueueTime;
  }
};

// Thread safety: thread-safe (stateless).
class HOLDBACK_API EdfOrderingPolicy final : public OrderingPolicy {
 public:
  static constexpr std::string_view kType = "edf-ordering-policy";
  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] bool less(const QueuedRequestView& a,
                          const QueuedRequestView& b) const noexcept override;
  // enqueueTime + effectiveTtl, or TimePoint::max() without a TTL (saturating, never overflows).
  [[nodiscard]] static TimePoint deadlineOf(const QueuedRequestView& r) noexcept;
};

// One flow's queue as fairness policies see it.
// Thread safety: thread-hostile outside pick() (only valid under the controller's lock).
class HOLDBACK_API FlowQueueView {
 public:
  [[nodiscard]] virtual std::string_view flowId() const noexcept = 0;
  [[nodiscard]] virtual std::size_t size() const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t bytes() const noexcept = 0;
  // The request the flow's ordering policy puts first; nullptr when empty.
  [[nodiscard]] virtual const QueuedRequestView* head() const noexcept = 0;

 protected:
  ~FlowQueueView() = default;
};

// A priority band as fairness policies see it. Only non-empty flows are indexed, so every call
// is O(1) or O(log F) and independent of the number of idle flows.
// Thread safety: thread-hostile outside pick() (only valid under the controller's lock).
class HOLDBACK_API BandView {
 public:
  [[nodiscard]] virtual Priority priority() const noexcept = 0;
  [[nodiscard]] virtual std::size_t activeFlowCount() const noexcept = 0;
  // The non-empty flow whose head goes first by the band's ordering policy; nullptr when the
  // band is empty. O(1).
  [[nodiscard]] virtual const FlowQueueView* bestHeadFlow() const noexcept = 0;
  // The non-empty flow with the smallest flow id (byte-wise); nullptr when empty. O(1).
  [[nodiscard]] virtual const FlowQueueView* firstActiveFlow() const noexcept = 0;
  // The non-empty flow with the smallest id strictly greater than `flowId`; nullptr if none.
  // O(log F).
  [[nodiscard]] virtual const FlowQueueView* nextActiveFlowAfter(
      std::string_view flowId) const noexcept = 0;

 protected:
  ~BandView() = default;
};

// Per-band state of a fairness policy (one object per band, created when the band is).
// Thread safety: thread-compatible (the controller only touches it under its lock).
class HOLDBACK_API FairnessState {
 public:
  virtual ~FairnessState() = default;
};

// Per-flow state of a fairness policy (one object per flow of a band, created with the flow and
// destroyed with it), for a policy that keeps its own index of the band's flows.
// Thread safety: thread-compatible (the controller only touches it under its lock).
class HOLDBACK_API FairnessFlowState {
 public:
  virtual ~FairnessFlowState() = default;
};

// Thread safety: implementations must be thread-safe (per-band mutable state belongs in the
// FairnessState).
class HOLDBACK_API FairnessPolicy {
 public:
  virtual ~FairnessPolicy() = default;
  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  // Called once per band when the band is created; may return nullptr (stateless policy).
  [[nodiscard]] virtual std::unique_ptr<FairnessState> newState() const { return nullptr; }
  // Chooses the flow to dispatch from. Called only for bands with at least one non-empty flow;
  // returning nullptr (or an empty flow) makes the cycle skip the band.
  [[nodiscard]] virtual const FlowQueueView* pick(const BandView& band,
                                                  FairnessState* state) const noexcept = 0;

  // Incremental maintenance (optional; the built-in policies use none). Called once per flow when
  // the band creates it (`bandState` is what newState() returned for the band); nullptr (the
  // default) = no per-flow state and no headChanged() calls for that flow.
  [[nodiscard]] virtual std::unique_ptr<FairnessFlowState> newFlowState(
      const FlowQueueView& /*flow*/, FairnessState* /*bandState*/) const {
    return nullptr;
  }
  // Called for a flow with a per-flow state each time its head() changes: the flow became
  // non-empty, a request went before its head, or its head left the queue (dispatched, expired,
  // cancelled, evicted; head() is then the next request or nullptr when the flow is now empty).
  // Called under the controller's lock with the flow's queue already updated; the same rules as
  // pick() apply (no blocking, no allocation in steady state, no exception, no call back into
  // the controller).
  virtual void headChanged(const FlowQueueView& /*flow*/,
                           FairnessFlowState& /*flowState*/) const noexcept {}

  // Reload (FlowController::reconfigure): when a band's fairness policy is replaced, the new
  // instance is handed the one it replaces, once per (previous, new) pair, before it is
  // installed, to take over whatever state should outlive the reload (program-aware fairness:
  // the attained service). `now` is the controller's clock. Called under no controller lock, on
  // the reconfiguring thread; may allocate, must not call the controller. Exceptions are
  // swallowed (the reload proceeds). The default does nothing (the new instance starts fresh).
  virtual void inheritState(const FairnessPolicy& /*previous*/, TimePoint /*now*/) const {}

  // Capabilities a host reads instead of casting to a concrete policy:
  // True when the policy wants recordServed() reports (program-aware fairness: a program's
  // attained service), so a host may skip measuring what a request was served otherwise.
  [[nodiscard]] virtual bool observesServed() const noexcept { return false; }
  // The host reports a completed request of flow `flowId`: its input and output tokens and how
  // long it waited in the queue, if known. Called from any thread, under no controller lock;
  // may allocate. The default ignores it.
  virtual void recordServed(std::string_view /*flowId*/, std::uint64_t /*inputTokens*/,
                            std::uint64_t /*outputTokens*/, TimePoint /*now*/,
                            std::optional<Duration> /*queueWait*/) const {}
  // An operator's JSON snapshot of the policy's state (one object); empty (the default) when the
  // policy keeps none worth showing. Called from any thread; may allocate.
  [[nodiscard]] virtual std::string dumpState(TimePoint /*now*/) const { return {}; }
};

// Thread safety: thread-safe (stateless).
class HOLDBACK_API GlobalStrictFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "global-strict-fairness-policy";
  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] const FlowQueueView* pick(const BandView& band,
                                          FairnessState* state) const noexcept override;
};

// The cursor (last picked flow id) advances on every pick, even if the dispatch later fails: the
// unit of fairness is the dispatch opportunity, not bytes or tokens (as the reference).
// Thread safety: thread-safe (the cursor lives in the per-band state).
class HOLDBACK_API RoundRobinFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "round-robin-fairness-policy";
  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] std::unique_ptr<FairnessState> newState() const override;
  [[nodiscard]] const FlowQueueView* pick(const BandView& band,
                                          FairnessState* state) const noexcept override;
};

// Shared immutable instances of the built-in policies.
[[nodiscard]] HOLDBACK_API std::shared_ptr<const OrderingPolicy> fcfsOrdering();
[[nodiscard]] HOLDBACK_API std::shared_ptr<const OrderingPolicy> edfOrdering();
[[nodiscard]] HOLDBACK_API std::shared_ptr<const FairnessPolicy> globalStrictFairness();
[[nodiscard]] HOLDBACK_API std::shared_ptr<const FairnessPolicy> roundRobinFairness();

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/fairness-inl.hpp"
#endif
