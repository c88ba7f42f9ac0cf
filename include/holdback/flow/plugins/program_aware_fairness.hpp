// program-aware-fairness: picks the program (flow) of a band by least attained service, with
// head-of-queue wait as a second term (the Go reference's fairness/program-aware plugin under
// pkg/epp/framework/plugins/flowcontrol/ in llm-d-router, https://github.com/llm-d/llm-d-router,
// PRs #1534, #1839, #2116; strategy "las").
//
//   programs          flow ids, shared across bands (one table per policy instance)
//   attained service  sum of (inputTokens + 2 x outputTokens) the host reports per program,
//                     decayed by 2^(-elapsed / halfLife) (halfLife 0 = no decay)
//   pick              over the band's non-empty flows:
//                       score = weightService x (1 - norm(service)) + weightHeadWait x norm(wait)
//                     norm(v) = (v - min) / (max - min) over the candidates, 0.5 when max == min;
//                     wait = now - head.enqueueTime. The highest score wins (strict >; ties go to
//                     the smaller flow id, where upstream's map order is random).
//   eviction          a program not reported (nor first queued) for evictionTtl and with no
//                     queued request is forgotten (0 = never), checked at most every
//                     evictionSweep by recordServed.
//
// How it stays cheap (docs/guide/flow-controller.md, "Program-aware fairness"): the pick is the
// argmax of a score that is decreasing in service and in head enqueue time, so it needs the band's
// non-empty flows ordered by each, not a scan:
//   - decay is a factor common to every program, so each program stores its service scaled to
//     a reference epoch (moved forward before it could overflow) and the order never changes
//     with time; min-max normalization cancels that factor and `now` from the head wait;
//   - the policy keeps per-flow state (FairnessPolicy::newFlowState) and is told of every head
//     change (headChanged): each band's state indexes its non-empty flows in a search tree by
//     service whose nodes are the flow states themselves (no allocation) and know their
//     subtree's oldest and youngest head; recordServed re-keys the program's non-empty flows in
//     every band (O(log F) each);
//   - a pick reads the extremes of both keys, answers the one-term cases (equal services, equal
//     head times, a zero weight) from the first flow by the other key, and otherwise walks the
//     tree in service order, skipping every subtree whose best possible score (its lowest
//     service with its oldest head) is below the best met; its choice is the full scan's. A
//     walk that scores kMaxPickVisits flows stops with the best met (pickCounts()), so a pick's
//     cost is bounded whatever the data.
// A program's flows hold a pointer to its table entry (no string lookup per step); a program
// with queued requests is not forgotten.
//
// The host reports what each program was served when a request completes (recordServed); a
// request that never reports costs its program nothing. A program enters the table when it is
// first reported or first has a queued request. dumpState() is the JSON snapshot an operator
// fetches (upstream's DumpState): parameters, every program with its decayed service, reported
// requests, mean queue wait and non-empty flows, and Jain's fairness index over the programs' mean
// waits
// ((sum x)^2 / (n sum x^2), 1.0 when n <= 1).
//
// Thread safety: thread-safe. pick() and headChanged() run under the controller's lock and take
// the policy's own mutex briefly (never while calling host code); the per-band indexes are only
// touched under that mutex, so one instance may serve several controllers, and
// recordServed/attainedService/dumpState may be called from any thread. A reload that builds a new
// instance carries the table over (inheritState, called by FlowController::reconfigure).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/thread_annotations.hpp"
#include "holdback/flow/fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct ProgramAwareFairnessOptions {
  // Upstream's only strategy: least attained service.
  std::string strategy = "las";
  double weightService = 0.8;                          // lasWeightService, >= 0
  double weightHeadWait = 0.2;                         // lasWeightHeadWait, >= 0
  Duration halfLife = std::chrono::seconds(60);        // lasHalfLifeSeconds, >= 0 (0 = none)
  Duration evictionTtl = std::chrono::seconds(3600);   // evictionTtlSeconds, >= 0 (0 = never)
  Duration evictionSweep = std::chrono::seconds(300);  // evictionSweepSeconds, > 0
};

class HOLDBACK_API ProgramAwareFairnessPolicy final : public FairnessPolicy {
 public:
  static constexpr std::string_view kType = "program-aware-fairness";
  // Weight of an output token in attained service (an input token weighs 1).
  static constexpr double kOutputTokenWeight = 2.0;
  // A pick's walk scores at most kMaxPickVisits flows (see above).
  static constexpr int kMaxPickVisits = 64;

  static Result<std::unique_ptr<ProgramAwareFairnessPolicy>> create(
      ProgramAwareFairnessOptions options = {}, std::string name = std::string(kType));
  // Appends one error per invalid field; `path` is the JSON pointer of the parameters object.
  static void validate(const ProgramAwareFairnessOptions& options, const std::string& path,
                       Diagnostics& diagnostics);

  ~ProgramAwareFairnessPolicy() override;
  [[nodiscard]] std::string_view type() const noexcept override { return kType; }
  [[nodiscard]] std::string_view name() const noexcept { return name_; }
  [[nodiscard]] const ProgramAwareFairnessOptions& options() const noexcept { return options_; }

  [[nodiscard]] std::unique_ptr<FairnessState> newState() const override;
  [[nodiscard]] const FlowQueueView* pick(const BandView& band,
                                          FairnessState* state) const noexcept override;
  [[nodiscard]] std::unique_ptr<FairnessFlowState> newFlowState(
      const FlowQueueView& flow, FairnessState* bandState) const override;
  void headChanged(const FlowQueueView& flow, FairnessFlowState& flowState) const noexcept override;
  // Reload: takes over `previous`'s programs when it is a ProgramAwareFairnessPolicy (another
  // type: nothing). Each program's decayed service at `now` under previous's half-life is added
  // to this instance's, which decays it with its own half-life from `now` on; its reported
  // requests and queue waits are added too (a program both know gets the sums). Copies under
  // previous's mutex, then merges under this one's: never both at once, so there is no lock
  // order between instances. Allocates (one entry per program).
  void inheritState(const FairnessPolicy& previous, TimePoint now) const override;

  // The host reports a completed request of program `flowId`: its input and output tokens, and
  // optionally how long it waited in the queue (for the fairness index). Allocates only for a
  // program it has not seen (or forgotten). Negative / non-finite figures count as 0.
  // (FairnessPolicy::recordServed; observesServed() is true.)
  [[nodiscard]] bool observesServed() const noexcept override { return true; }
  void recordServed(std::string_view flowId, std::uint64_t inputTokens, std::uint64_t outputTokens,
                    TimePoint now, std::optional<Duration> queueWait = std::nullopt) const override;
  // The program's decayed attained service at `now` (0 for an unknown program).
  [[nodiscard]] double attainedService(std::string_view flowId, TimePoint now) const;
  [[nodiscard]] std::size_t programCount() const;
  // Jain's fairness index over the mean queue wait of the programs that reported a wait.
  [[nodiscard]] double jainFairnessIndex() const;
  // The JSON snapshot (one object, keys in a fixed order).
  [[nodiscard]] std::string dumpState(TimePoint now) const override;
  // Picks made, and how many of them stopped at kMaxPickVisits before proving that their choice
  // is the full scan's (see above).
  struct PickCounts {
    std::uint64_t picks = 0;
    std::uint64_t stoppedAtLimit = 0;
  };
  [[nodiscard]] PickCounts pickCounts() const;

 private:
  struct FlowEntry;  // a flow's state: its keys in its band's indexes, its program
  struct BandIndex;  // a band's state: its non-empty flows by service and by head enqueue time
  struct PickWalk;   // one pick's branch-and-bound walk of a BandIndex
  struct Program {
    double scaledService = 0.0;  // service x 2^((lastUpdate - epoch) / halfLife), see above
    TimePoint lastUpdate{};      // the last report (or when the program was first queued)
    std::uint64_t requests = 0;
    double waitSeconds = 0.0;  // sum of reported queue waits
    std::uint64_t waits = 0;
    FlowEntry* flows = nullptr;  // its non-empty flows in every band (an intrusive list)
  };
  ProgramAwareFairnessPolicy(ProgramAwareFairnessOptions options, std::string name);
  [[nodiscard]] double decayExponent(TimePoint t) const noexcept HOLDBACK_REQUIRES(mu_);
  // Sets the epoch at `now` if there is none; moves it to `now` when the exponent at `now` is
  // above the rebase threshold (re-keying every indexed flow). Returns the exponent at `now`.
  double prepareEpochLocked(TimePoint now) const noexcept HOLDBACK_REQUIRES(mu_);
  [[nodiscard]] double jainLocked() const HOLDBACK_REQUIRES(mu_);
  // The flow's program entry (created if unknown; nullptr only if that allocation failed).
  Program* resolveLocked(FlowEntry& e, TimePoint seen) const noexcept HOLDBACK_REQUIRES(mu_);
  void linkLocked(FlowEntry& e, TimePoint headEnqueue) const noexcept HOLDBACK_REQUIRES(mu_);
  void unlinkLocked(FlowEntry& e) const noexcept HOLDBACK_REQUIRES(mu_);
  // Moves the program's non-empty flows to its current service in their bands' indexes.
  void rekeyLocked(Program& p) const noexcept HOLDBACK_REQUIRES(mu_);
  [[nodiscard]] const FlowQueueView* pickLocked(const BandView& band,
                                                const BandIndex& index) const noexcept
      HOLDBACK_REQUIRES(mu_);

  const ProgramAwareFairnessOptions options_;
  const std::string name_;
  mutable Mutex mu_;
  mutable std::map<std::string, Program, std::less<>> programs_ HOLDBACK_GUARDED_BY(mu_);
  mutable TimePoint epoch_ HOLDBACK_GUARDED_BY(mu_){};
  mutable bool has_epoch_ HOLDBACK_GUARDED_BY(mu_) = false;
  mutable TimePoint last_sweep_ HOLDBACK_GUARDED_BY(mu_){};
  // Bumped when a sweep forgets programs: a flow's cached program pointer of an older
  // generation is looked up again.
  mutable std::uint64_t evictions_ HOLDBACK_GUARDED_BY(mu_) = 0;
  mutable PickCounts pick_counts_ HOLDBACK_GUARDED_BY(mu_);
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/plugins/program_aware_fairness-inl.hpp"
#endif
