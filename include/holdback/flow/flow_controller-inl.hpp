// Implementation of holdback/flow/flow_controller.hpp: compiled into libholdback by
// src/flow_controller.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/flow/flow_controller.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "holdback/detector/stage_saturation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// Pure rules

namespace detail::flow_controller {

// used + add > max, without overflow; max == 0 is "no limit".
HOLDBACK_INLINE bool exceeds(std::uint64_t used, std::uint64_t add, std::uint64_t max) noexcept {
  if (max == 0) return false;
  return used > max || add > max - used;
}

// to - from, saturated at Duration::min()/max() instead of overflowing (hosts may use any epoch,
// and TimePoint::max() is a legal deadline).
HOLDBACK_INLINE Duration elapsed(TimePoint from, TimePoint to) noexcept {
  using Rep = Duration::rep;
  const Rep a = to.time_since_epoch().count();
  const Rep b = from.time_since_epoch().count();
  Rep out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return a > b ? Duration::max() : Duration::min();
  return Duration(out);
}

}  // namespace detail::flow_controller

HOLDBACK_INLINE bool hasCapacity(std::uint64_t itemBytes, const CapacityUsage& global,
                                 const CapacityUsage* band) noexcept {
  if (detail::flow_controller::exceeds(global.usedBytes, itemBytes, global.maxBytes)) return false;
  if (detail::flow_controller::exceeds(global.usedRequests, 1, global.maxRequests)) return false;
  if (band == nullptr) return false;
  if (detail::flow_controller::exceeds(band->usedBytes, itemBytes, band->maxBytes)) return false;
  if (detail::flow_controller::exceeds(band->usedRequests, 1, band->maxRequests)) return false;
  return true;
}

HOLDBACK_INLINE ExpiryVerdict isExpired(TimePoint enqueueTime, Duration effectiveTtl,
                                        Duration noEndpointTtl, PoolRegime regime,
                                        TimePoint now) noexcept {
  ExpiryVerdict verdict;
  verdict.outcome = regime.empty ? QueueOutcome::kEvictedNoEndpoints : QueueOutcome::kEvictedTtl;
  const Duration budget = regime.empty ? noEndpointTtl : effectiveTtl;
  if (budget <= Duration::zero()) return verdict;
  const TimePoint charge_from = std::max(enqueueTime, regime.since);
  if (now < charge_from) return verdict;
  // now >= charge_from + budget, written so that it cannot overflow.
  verdict.expired = detail::flow_controller::elapsed(charge_from, now) >= budget;
  return verdict;
}

// ---------------------------------------------------------------------------------------------
// Internal state

namespace detail::flow_controller {

using namespace std::chrono_literals;

inline constexpr Duration kDefaultRequestTtl = 60s;
inline constexpr std::uint64_t kDefaultBandMaxRequests = 5000;
inline constexpr std::uint64_t kDefaultBandMaxBytes = 1'000'000'000;
// Dead heads a single cycle may evict before giving up on dispatching in that cycle (bounds the
// cycle's work and the completions it holds on its stack).
inline constexpr std::size_t kMaxFinalizedPerCycle = 32;

struct Flow;
struct Band;

struct Item {
  QueuedRequestView view;
  RequestId id = 0;
  std::string flowId;
  Priority requestedPriority = 0;
  std::any payload;
  Flow* flow = nullptr;
};

struct ItemLess {
  const OrderingPolicy* ordering = nullptr;
  bool operator()(const Item* a, const Item* b) const noexcept {
    if (ordering->less(a->view, b->view)) return true;
    if (ordering->less(b->view, a->view)) return false;
    return a->view.sequence < b->view.sequence;
  }
};

struct Flow final : FlowQueueView {
  Flow(std::string flow_id, Band* owner, const OrderingPolicy* ordering)
      : id(std::move(flow_id)), band(owner), items(ItemLess{ordering}) {}
  std::string_view flowId() const noexcept override { return id; }
  std::size_t size() const noexcept override { return items.size(); }
  std::uint64_t bytes() const noexcept override { return queued_bytes; }
  const QueuedRequestView* head() const noexcept override {
    return items.empty() ? nullptr : &(*items.begin())->view;
  }

  std::string id;
  Band* band;
  std::set<Item*, ItemLess> items;
  std::uint64_t queued_bytes = 0;
  TimePoint last_active{};
};

// Orders non-empty flows by their heads.
struct HeadLess {
  ItemLess item;
  bool operator()(const Flow* a, const Flow* b) const noexcept {
    return item(*a->items.begin(), *b->items.begin());
  }
};

struct IdLess {
  using is_transparent = void;
  static std::string_view key(const Flow* f) noexcept { return f->id; }
  static std::string_view key(std::string_view s) noexcept { return s; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return key(a) < key(b);
  }
};

struct Counters {
  std::uint64_t gated_cycles = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};
  std::array<std::uint64_t, kQueueDurationBucketsSeconds.size() + 1> queue_duration_buckets{};
  double queue_duration_sum = 0.0;
};

struct Band final : BandView {
  Band(Priority p, std::uint64_t max_requests, std::uint64_t max_bytes,
       std::shared_ptr<const FairnessPolicy> fairness_policy,
       std::shared_ptr<const OrderingPolicy> ordering_policy)
      : prio(p),
        maxRequests(max_requests == 0 ? kDefaultBandMaxRequests : max_requests),
        maxBytes(max_bytes == 0 ? kDefaultBandMaxBytes : max_bytes),
        fairness(fairness_policy ? std::move(fairness_policy) : globalStrictFairness()),
        ordering(ordering_policy ? std::move(ordering_policy) : fcfsOrdering()),
        fairness_state(fairness->newState()),
        heads(HeadLess{ItemLess{ordering.get()}}) {}

  Priority priority() const noexcept override { return prio; }
  std::size_t activeFlowCount() const noexcept override { return active.size(); }
  const FlowQueueView* bestHeadFlow() const noexcept override {
    return heads.empty() ? nullptr : *heads.begin();
  }
  const FlowQueueView* firstActiveFlow() const noexcept override {
    return active.empty() ? nullptr : *active.begin();
  }
  const FlowQueueView* nextActiveFlowAfter(std::string_view flow_id) const noexcept override {
    auto it = active.upper_bound(flow_id);
    return it == active.end() ? nullptr : *it;
  }

  Priority prio;
  std::uint64_t maxRequests;
  std::uint64_t maxBytes;
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
  std::unique_ptr<FairnessState> fairness_state;

  std::map<std::string, std::unique_ptr<Flow>, std::less<>> flows;
  std::set<Flow*, HeadLess> heads;  // non-empty flows by head
  std::set<Flow*, IdLess> active;   // non-empty flows by id
  std::size_t queued_requests = 0;
  std::uint64_t queued_bytes = 0;

  bool initial = false;
  bool desired = false;
  std::optional<TimePoint> last_arrival;
  TimePoint last_activity{};
  std::optional<double> last_ceiling;
  Counters* counters = nullptr;
};

HOLDBACK_INLINE std::string formatDuration(Duration d) {
  if (d % std::chrono::milliseconds(1) == Duration::zero()) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
  }
  return std::to_string(d.count()) + "ns";
}

}  // namespace detail::flow_controller

struct Ticket::Core {
  // The internal types of this file (detail::flow_controller), by their short names.
  using Band = detail::flow_controller::Band;
  using Item = detail::flow_controller::Item;
  using Flow = detail::flow_controller::Flow;
  using Counters = detail::flow_controller::Counters;
  // Resolved options.
  FlowControllerOptions opts;
  Duration default_ttl{};
  Duration no_endpoint_ttl{};

  // Serializes dispatchCycle / expire / shutdown; guards evaluator.
  std::mutex cycle_mu;
  StageSaturationEvaluator evaluator;

  // Guards everything below.
  mutable std::mutex mu;
  std::map<Priority, std::unique_ptr<Band>, std::greater<>> bands;
  std::vector<Band*> ordered;  // highest first
  std::vector<Band*> domain_bands;
  std::vector<Priority> domain_priorities;
  std::vector<double> ceilings;
  std::map<Priority, Counters> counters;
  std::unordered_map<RequestId, std::unique_ptr<Item>> items;
  std::vector<Priority> desired;
  std::size_t total_requests = 0;
  std::uint64_t total_bytes = 0;
  RequestId next_id = 1;
  std::uint64_t next_sequence = 1;
  PoolRegime regime;
  bool stopped = false;
  double last_saturation = 0.0;
  std::optional<double> last_prefill;
  std::optional<double> last_decode;
  std::uint64_t cycles = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};

  // Runner.
  std::thread runner;
  std::mutex runner_mu;
  std::condition_variable runner_cv;
  std::size_t pending_arrivals = 0;
  bool runner_stop = false;

  // --- topology (under mu) -------------------------------------------------------------------

  Band* addBand(Priority p, std::uint64_t max_requests, std::uint64_t max_bytes,
                std::shared_ptr<const FairnessPolicy> fairness,
                std::shared_ptr<const OrderingPolicy> ordering) {
    auto band = std::make_unique<Band>(p, max_requests, max_bytes, std::move(fairness),
                                       std::move(ordering));
    band->counters = &counters[p];
    Band* raw = band.get();
    bands.emplace(p, std::move(band));
    rebuildOrder();
    return raw;
  }

  Band* addBandFromTemplate(Priority p) {
    const BandTemplate& t =
        (p < 0 && opts.defaultNegativeBand) ? *opts.defaultNegativeBand : opts.defaultBand;
    return addBand(p, t.maxRequests, t.maxBytes, t.fairness, t.ordering);
  }

  void rebuildOrder() {
    ordered.clear();
    for (auto& [p, band] : bands) ordered.push_back(band.get());
    domain_bands.reserve(ordered.size());
    domain_priorities.reserve(ordered.size());
    ceilings.reserve(ordered.size());
  }

  Band* bandOrZero(Priority p) const noexcept {
    auto it = bands.find(p);
    if (it != bands.end()) return it->second.get();
    return bands.at(0).get();
  }

  Band* resolveBand(Priority p) {
    auto it = bands.find(p);
    if (it != bands.end()) return it->second.get();
    if (opts.provisionOnFirstUse && bands.size() < opts.maxBands) return addBandFromTemplate(p);
    return bands.at(0).get();
  }

  bool isDesired(Priority p) const noexcept {
    return std::find(desired.begin(), desired.end(), p) != desired.end();
  }

  static bool samePolicy(std::string_view a_type, std::string_view b_type, const void* a,
                         const void* b) noexcept {
    if (a == b) return true;
    // The built-in policies are stateless: two instances of one built-in type are the same.
    const bool builtin =
        a_type == FcfsOrderingPolicy::kType || a_type == EdfOrderingPolicy::kType ||
        a_type == GlobalStrictFairnessPolicy::kType || a_type == RoundRobinFairnessPolicy::kType;
    return builtin && a_type == b_type;
  }

  // Gives the band in `slot` new limits and policies. A policy change rebuilds the band and
  // moves every queued request over (so the queues are ordered by the new ordering policy).
  Band* reshapeBand(std::unique_ptr<Band>& slot, std::uint64_t max_requests,
                    std::uint64_t max_bytes, std::shared_ptr<const FairnessPolicy> fairness,
                    std::shared_ptr<const OrderingPolicy> ordering) {
    Band* old = slot.get();
    if (!fairness) fairness = globalStrictFairness();
    if (!ordering) ordering = fcfsOrdering();
    if (samePolicy(fairness->type(), old->fairness->type(), fairness.get(), old->fairness.get()) &&
        samePolicy(ordering->type(), old->ordering->type(), ordering.get(), old->ordering.get())) {
      old->maxRequests =
          max_requests == 0 ? detail::flow_controller::kDefaultBandMaxRequests : max_requests;
      old->maxBytes = max_bytes == 0 ? detail::flow_controller::kDefaultBandMaxBytes : max_bytes;
      return old;
    }
    auto band = std::make_unique<Band>(old->prio, max_requests, max_bytes, std::move(fairness),
                                       std::move(ordering));
    band->counters = old->counters;
    band->initial = old->initial;
    band->desired = old->desired;
    band->last_arrival = old->last_arrival;
    band->last_activity = old->last_activity;
    band->last_ceiling = old->last_ceiling;
    for (auto& [id, flow] : old->flows) {
      auto moved = std::make_unique<Flow>(flow->id, band.get(), band->ordering.get());
      moved->last_active = flow->last_active;
      Flow* raw = moved.get();
      band->flows.emplace(raw->id, std::move(moved));
      for (Item* item : flow->items) {
        item->flow = raw;
        addToQueue(item);
      }
    }
    slot = std::move(band);
    return slot.get();
  }

  // See FlowController::reconfigure.
  Diagnostics reconfigure(FlowControllerOptions o) {
    Diagnostics d;
    // The host collaborators are kept (deliver() calls onOutcome with no lock held, so it must
    // never change); validate() only needs them present.
    o.endpoints = nullptr;
    o.onOutcome = nullptr;
    {
      std::lock_guard lock(mu);
      o.endpoints = opts.endpoints;  // opts.endpoints and opts.onOutcome are never written
      o.onOutcome = opts.onOutcome;
    }
    FlowController::validate(o, d);
    if (d.hasErrors()) return d;
    std::lock_guard cycle_lock(cycle_mu);
    std::lock_guard lock(mu);
    opts.policy = std::move(o.policy);
    opts.detector = std::move(o.detector);
    opts.bands = std::move(o.bands);
    opts.defaultBand = std::move(o.defaultBand);
    opts.defaultNegativeBand = std::move(o.defaultNegativeBand);
    opts.provisionOnFirstUse = o.provisionOnFirstUse;
    opts.maxBands = o.maxBands;
    opts.maxRequests = o.maxRequests;
    opts.maxBytes = o.maxBytes;
    opts.defaultRequestTtl = o.defaultRequestTtl;
    opts.noEndpointRequestTtl = o.noEndpointRequestTtl;
    opts.priorityDomain = o.priorityDomain;
    opts.activityWindow = o.activityWindow;
    default_ttl = opts.defaultRequestTtl.value_or(detail::flow_controller::kDefaultRequestTtl);
    no_endpoint_ttl = opts.noEndpointRequestTtl.value_or(default_ttl);

    std::set<Priority> declared;
    for (const BandOptions& b : opts.bands) {
      declared.insert(b.priority);
      auto it = bands.find(b.priority);
      if (it == bands.end()) {
        addBand(b.priority, b.maxRequests, b.maxBytes, b.fairness, b.ordering)->initial = true;
      } else {
        reshapeBand(it->second, b.maxRequests, b.maxBytes, b.fairness, b.ordering)->initial = true;
      }
    }
    for (auto& [p, band] : bands) {
      if (declared.count(p) > 0) continue;
      if (p == 0) {
        const BandTemplate& t = opts.defaultBand;
        reshapeBand(band, t.maxRequests, t.maxBytes, t.fairness, t.ordering)->initial = true;
      } else {
        band->initial = false;
      }
    }
    if (bands.find(0) == bands.end()) addBandFromTemplate(0)->initial = true;
    rebuildOrder();
    return d;
  }

  void removeBand(Band* band) {
    bands.erase(band->prio);
    rebuildOrder();
  }

  // --- queues (under mu) ---------------------------------------------------------------------

  static void addToQueue(Item* item) {
    Flow* f = item->flow;
    Band* b = f->band;
    if (f->items.empty()) {
      f->items.insert(item);
      b->heads.insert(f);
      b->active.insert(f);
    } else if (f->items.key_comp()(item, *f->items.begin())) {
      auto node = b->heads.extract(f);
      f->items.insert(item);
      b->heads.insert(std::move(node));
    } else {
      f->items.insert(item);
    }
    f->queued_bytes += item->view.sizeBytes;
    b->queued_requests += 1;
    b->queued_bytes += item->view.sizeBytes;
  }

  // Removes `item` from its flow and band indexes (no allocation: node handles are reused).
  static void removeFromQueue(Item* item, TimePoint now) noexcept {
    Flow* f = item->flow;
    Band* b = f->band;
    if (*f->items.begin() == item) {
      auto node = b->heads.extract(f);
      f->items.erase(item);
      if (f->items.empty()) {
        b->active.erase(f);
        f->last_active = now;
      } else {
        b->heads.insert(std::move(node));
      }
    } else {
      f->items.erase(item);
    }
    f->queued_bytes -= item->view.sizeBytes;
    b->queued_requests -= 1;
    b->queued_bytes -= item->view.sizeBytes;
    if (b->queued_requests == 0) b->last_activity = std::max(b->last_activity, now);
  }

  static void recordQueueDuration(Band* band, Duration waited) noexcept {
    const double seconds = std::chrono::duration<double>(waited).count();
    std::size_t i = 0;
    while (i < kQueueDurationBucketsSeconds.size() && seconds > kQueueDurationBucketsSeconds[i]) {
      ++i;
    }
    Counters& c = *band->counters;
    c.queue_duration_buckets[i] += 1;
    c.queue_duration_sum += seconds > 0.0 ? seconds : 0.0;
  }

  void count(Band* band, QueueOutcome outcome) noexcept {
    const auto k = static_cast<std::size_t>(outcome);
    band->counters->outcomes[k] += 1;
    outcomes[k] += 1;
  }

  // Removes a queued item, counts its outcome and returns its completion.
  Completion finalizeQueued(Item* item, Outcome outcome, TimePoint now) noexcept {
    Band* band = item->flow->band;
    removeFromQueue(item, now);
    total_requests -= 1;
    total_bytes -= item->view.sizeBytes;
    count(band, outcome.kind);
    Completion c;
    c.id = item->id;
    c.flowId = std::move(item->flowId);
    c.requestedPriority = item->requestedPriority;
    c.bandPriority = band->prio;
    c.sizeBytes = item->view.sizeBytes;
    c.outcome = outcome;
    c.enqueueTime = item->view.enqueueTime;
    c.finalizedAt = now;
    c.payload = std::move(item->payload);
    if (outcome.kind == QueueOutcome::kDispatched)
      recordQueueDuration(band, detail::flow_controller::elapsed(c.enqueueTime, now));
    const RequestId id = item->id;  // erase() must not read the key it destroys
    items.erase(id);                // destroys *item
    return c;
  }

  void updateRegime(bool empty, TimePoint now) noexcept {
    if (empty != regime.empty) regime = PoolRegime{empty, now};
  }

  // Why a queued item is already dead at `now`, if it is.
  std::optional<Outcome> deadOutcome(const Item& item, TimePoint now) const noexcept {
    if (item.view.deadline && now >= *item.view.deadline) {
      return Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired};
    }
    const ExpiryVerdict v =
        isExpired(item.view.enqueueTime, item.view.effectiveTtl, no_endpoint_ttl, regime, now);
    if (!v.expired) return std::nullopt;
    if (v.outcome == QueueOutcome::kEvictedNoEndpoints) {
      return Outcome{QueueOutcome::kEvictedNoEndpoints, OutcomeCause::kNoEndpoints};
    }
    return Outcome{QueueOutcome::kEvictedTtl, OutcomeCause::kTtlExpired};
  }

  void deliver(Completion&& c) noexcept {
    HOLDBACK_TRY {
      opts.onOutcome(std::move(c));
    }
    HOLDBACK_CATCH_ALL {
      // The host's callback threw; the outcome was delivered as far as the library can tell.
    }
  }

  void notifyRunner() {
    if (!opts.runner.enabled) return;
    {
      std::lock_guard lock(runner_mu);
      pending_arrivals += 1;
    }
    runner_cv.notify_one();
  }

  // --- operations ----------------------------------------------------------------------------

  RequestId enqueue(FlowRequest request, TimePoint now) {
    std::optional<Completion> rejected;
    RequestId id = 0;
    {
      std::lock_guard lock(mu);
      id = next_id++;
      Outcome outcome{QueueOutcome::kDispatched, OutcomeCause::kNone};
      Band* band = nullptr;
      Duration ttl = request.ttl && *request.ttl > Duration::zero() ? *request.ttl : default_ttl;
      if (stopped) {
        outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kNotRunning};
        band = bandOrZero(request.priority);
      } else if (request.flowId.empty()) {
        outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kInvalidRequest};
        band = bandOrZero(request.priority);
      } else {
        band = resolveBand(request.priority);
        band->last_arrival = now;
        band->last_activity = std::max(band->last_activity, now);
        if (request.deadline) {
          const Duration remaining = detail::flow_controller::elapsed(now, *request.deadline);
          if (remaining <= Duration::zero()) {
            outcome = {QueueOutcome::kRejectedOther, OutcomeCause::kTtlExpired};
          } else if (ttl <= Duration::zero() || remaining < ttl) {
            ttl = remaining;
          }
        }
        if (!outcome.rejected()) {
          const CapacityUsage global{opts.maxBytes, total_bytes, opts.maxRequests, total_requests};
          const CapacityUsage local{band->maxBytes, band->queued_bytes, band->maxRequests,
                                    band->queued_requests};
          if (!hasCapacity(request.sizeBytes, global, &local)) {
            outcome =
                regime.empty
                    ? Outcome{QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}
                    : Outcome{QueueOutcome::kRejectedCapacity, OutcomeCause::kQueueAtCapacity};
          }
        }
      }
      if (outcome.rejected()) {
        count(band, outcome.kind);
        Completion c;
        c.id = id;
        c.flowId = std::move(request.flowId);
        c.requestedPriority = request.priority;
        c.bandPriority = band->prio;
        c.sizeBytes = request.sizeBytes;
        c.outcome = outcome;
        c.enqueueTime = now;
        c.finalizedAt = now;
        c.payload = std::move(request.payload);
        rejected = std::move(c);
      } else {
        auto flow_it = band->flows.find(std::string_view(request.flowId));
        if (flow_it == band->flows.end()) {
          auto flow = std::make_unique<Flow>(request.flowId, band, band->ordering.get());
          flow_it = band->flows.emplace(flow->id, std::move(flow)).first;
        }
        auto item = std::make_unique<Item>();
        item->id = id;
        item->flowId = std::move(request.flowId);
        item->requestedPriority = request.priority;
        item->payload = std::move(request.payload);
        item->flow = flow_it->second.get();
        item->view.flowId = item->flowId;
        item->view.priority = band->prio;
        item->view.sizeBytes = request.sizeBytes;
        item->view.enqueueTime = now;
        item->view.effectiveTtl = ttl > Duration::zero() ? ttl : Duration::zero();
        item->view.deadline = request.deadline;
        item->view.sequence = next_sequence++;
        Item* raw = item.get();
        items.emplace(id, std::move(item));
        addToQueue(raw);
        total_requests += 1;
        total_bytes += request.sizeBytes;
      }
    }
    if (rejected) {
      deliver(std::move(*rejected));
    } else {
      notifyRunner();
    }
    return id;
  }

  bool cancel(RequestId id) noexcept {
    std::optional<Completion> done;
    {
      std::lock_guard lock(mu);
      auto it = items.find(id);
      if (it == items.end()) return false;
      done =
          finalizeQueued(it->second.get(),
                         {QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled}, opts.clock());
    }
    deliver(std::move(*done));
    return true;
  }

  DispatchResult dispatchCycle(TimePoint now) noexcept {
    DispatchResult result;
    std::array<Completion, detail::flow_controller::kMaxFinalizedPerCycle> finalized;
    std::size_t n_finalized = 0;
    {
      std::lock_guard cycle_lock(cycle_mu);
      const std::span<const Endpoint> pool = opts.endpoints->endpoints(now);
      const StageSaturation sat = evaluator.evaluate(*opts.detector, pool, now);
      const double s = sat.effective;
      result.saturation = s;

      std::lock_guard lock(mu);
      updateRegime(pool.empty(), now);
      last_saturation = s;
      last_prefill = sat.prefill;
      last_decode = sat.decode;
      cycles += 1;
      if (stopped) {
        result.kind = DispatchResult::Kind::kStopped;
        return result;
      }

      // The priorities the policy sees (buffers have capacity for every band: no allocation).
      domain_bands.clear();
      domain_priorities.clear();
      for (Band* band : ordered) {
        band->last_ceiling.reset();
        const bool in_domain =
            opts.priorityDomain == PriorityDomain::kProvisioned || band->queued_requests > 0 ||
            (band->last_arrival &&
             detail::flow_controller::elapsed(*band->last_arrival, now) < opts.activityWindow);
        if (!in_domain) continue;
        domain_bands.push_back(band);
        domain_priorities.push_back(band->prio);
      }
      ceilings.assign(domain_bands.size(), 1.0);
      opts.policy->computeLimit(s, domain_priorities, ceilings);
      for (std::size_t i = 0; i < domain_bands.size(); ++i) {
        domain_bands[i]->last_ceiling = ceilings[i];
      }

      result.kind = DispatchResult::Kind::kNothingQueued;
      if (total_requests == 0) return result;

      bool done = false;
      for (std::size_t i = 0; i < domain_bands.size() && !done; ++i) {
        Band* band = domain_bands[i];
        if (isGated(s, ceilings[i])) {  // HoL: checked before looking at the band's items
          band->counters->gated_cycles += 1;
          result.kind = DispatchResult::Kind::kGated;
          result.priority = band->prio;
          break;
        }
        while (band->queued_requests > 0) {
          const FlowQueueView* picked = band->fairness->pick(*band, band->fairness_state.get());
          if (picked == nullptr || picked->size() == 0) break;  // nothing eligible: next band
          const Flow* flow = static_cast<const Flow*>(picked);
          Item* head = *flow->items.begin();
          if (n_finalized == finalized.size()) {  // too many dead heads this cycle
            done = true;
            break;
          }
          if (auto dead = deadOutcome(*head, now)) {
            finalized[n_finalized++] = finalizeQueued(head, *dead, now);
            result.evicted += 1;
            continue;  // a dead head never costs the cycle its dispatch
          }
          result.kind = DispatchResult::Kind::kDispatched;
          result.priority = band->prio;
          result.id = head->id;
          finalized[n_finalized++] =
              finalizeQueued(head, {QueueOutcome::kDispatched, OutcomeCause::kNone}, now);
          done = true;
          break;
        }
      }
    }
    for (std::size_t i = 0; i < n_finalized; ++i) deliver(std::move(finalized[i]));
    return result;
  }

  std::size_t expire(TimePoint now) {
    std::vector<Completion> finalized;
    {
      std::lock_guard cycle_lock(cycle_mu);
      const std::span<const Endpoint> pool = opts.endpoints->endpoints(now);
      std::lock_guard lock(mu);
      updateRegime(pool.empty(), now);
      if (stopped) return 0;
      std::vector<std::pair<Item*, Outcome>> victims;
      for (auto& [p, band] : bands) {
        for (auto& [id, flow] : band->flows) {
          for (Item* item : flow->items) {
            if (auto dead = deadOutcome(*item, now)) victims.emplace_back(item, *dead);
          }
        }
      }
      finalized.reserve(victims.size());
      for (auto& [item, outcome] : victims) {
        finalized.push_back(finalizeQueued(item, outcome, now));
      }
      collectGarbage(now);
    }
    for (Completion& c : finalized) deliver(std::move(c));
    return finalized.size();
  }

  // Idle flows, then idle dynamically provisioned bands that are not desired (under mu).
  void collectGarbage(TimePoint now) {
    std::vector<Band*> idle_bands;
    for (auto& [p, band] : bands) {
      for (auto it = band->flows.begin(); it != band->flows.end();) {
        Flow* f = it->second.get();
        if (f->items.empty() &&
            detail::flow_controller::elapsed(f->last_active, now) >= opts.flowIdleTimeout) {
          it = band->flows.erase(it);
        } else {
          ++it;
        }
      }
      if (!band->initial && !band->desired && band->queued_requests == 0 &&
          detail::flow_controller::elapsed(band->last_activity, now) >= opts.bandIdleTimeout) {
        idle_bands.push_back(band.get());
      }
    }
    for (Band* band : idle_bands) removeBand(band);
  }

  void setDesiredPriorities(std::span<const Priority> priorities) {
    std::lock_guard lock(mu);
    desired.assign(priorities.begin(), priorities.end());
    for (const Priority p : desired) {
      if (bands.find(p) == bands.end()) addBandFromTemplate(p);
    }
    std::vector<Band*> removable;
    for (auto& [p, band] : bands) {
      band->desired = isDesired(p);
      if (!band->initial && !band->desired && band->queued_requests == 0) {
        removable.push_back(band.get());
      }
    }
    for (Band* band : removable) removeBand(band);
  }

  void shutdown(TimePoint now) {
    std::vector<Completion> finalized;
    {
      std::lock_guard cycle_lock(cycle_mu);
      std::lock_guard lock(mu);
      if (!stopped) {
        stopped = true;
        std::vector<Item*> all;
        all.reserve(items.size());
        for (auto& [id, item] : items) all.push_back(item.get());
        // Deterministic order: arrival order.
        std::sort(all.begin(), all.end(),
                  [](const Item* a, const Item* b) { return a->view.sequence < b->view.sequence; });
        finalized.reserve(all.size());
        for (Item* item : all) {
          finalized.push_back(
              finalizeQueued(item, {QueueOutcome::kEvictedOther, OutcomeCause::kNotRunning}, now));
        }
      }
    }
    stopRunner();
    for (Completion& c : finalized) deliver(std::move(c));
  }

  void stopRunner() {
    {
      std::lock_guard lock(runner_mu);
      runner_stop = true;
    }
    runner_cv.notify_all();
    if (runner.joinable() && runner.get_id() != std::this_thread::get_id()) runner.join();
  }

  void runLoop() {
    TimePoint next_expiry = opts.clock() + opts.expiryInterval;
    std::unique_lock lock(runner_mu);
    while (!runner_stop) {
      if (pending_arrivals == 0) {
        runner_cv.wait_for(lock, opts.runner.tickInterval,
                           [&] { return runner_stop || pending_arrivals > 0; });
      }
      if (runner_stop) break;
      // One cycle per arrival (as the reference), or one for the tick.
      const std::size_t arrivals = std::exchange(pending_arrivals, 0);
      lock.unlock();
      TimePoint now = opts.clock();
      if (now >= next_expiry) {
        expire(now);
        next_expiry = now + opts.expiryInterval;
      }
      const std::size_t cycles_to_run = arrivals == 0 ? 1 : arrivals;
      for (std::size_t i = 0; i < cycles_to_run; ++i) dispatchCycle(opts.clock());
      lock.lock();
    }
  }

  FlowControllerStats stats() const {
    FlowControllerStats out;
    std::lock_guard lock(mu);
    out.queuedRequests = total_requests;
    out.queuedBytes = total_bytes;
    out.maxRequests = opts.maxRequests;
    out.maxBytes = opts.maxBytes;
    out.lastSaturation = last_saturation;
    out.lastPrefillSaturation = last_prefill;
    out.lastDecodeSaturation = last_decode;
    out.poolEmpty = regime.empty;
    out.cycles = cycles;
    out.outcomes = outcomes;
    out.stopped = stopped;
    for (const auto& [p, c] : counters) {  // std::map: ascending
      BandStats b;
      b.priority = p;
      b.gatedCycles = c.gated_cycles;
      b.outcomes = c.outcomes;
      b.queueDurationBuckets = c.queue_duration_buckets;
      b.queueDurationSumSeconds = c.queue_duration_sum;
      auto it = bands.find(p);
      b.provisioned = it != bands.end();
      if (b.provisioned) {
        const Band& band = *it->second;
        b.queuedRequests = band.queued_requests;
        b.queuedBytes = band.queued_bytes;
        b.maxRequests = band.maxRequests;
        b.maxBytes = band.maxBytes;
        b.flows = band.flows.size();
        b.activeFlows = band.active.size();
        b.lastCeiling = band.last_ceiling;
      }
      out.bands.push_back(b);
    }
    std::reverse(out.bands.begin(), out.bands.end());
    return out;
  }
};

// ---------------------------------------------------------------------------------------------

HOLDBACK_INLINE std::string_view toString(DispatchResult::Kind kind) noexcept {
  switch (kind) {
    case DispatchResult::Kind::kDispatched:
      return "dispatched";
    case DispatchResult::Kind::kGated:
      return "gated";
    case DispatchResult::Kind::kNothingQueued:
      return "nothing-queued";
    case DispatchResult::Kind::kStopped:
      return "stopped";
  }
  return "unknown";
}

HOLDBACK_INLINE bool Ticket::cancel() noexcept {
  if (id_ == 0) return false;
  auto core = core_.lock();
  if (!core) return false;
  return core->cancel(id_);
}

HOLDBACK_INLINE void FlowController::validate(const FlowControllerOptions& o, Diagnostics& d) {
  if (!o.policy) d.error("/policy", "required: a UsageLimitPolicy");
  if (!o.detector) d.error("/detector", "required: a SaturationDetector");
  if (!o.endpoints) d.error("/endpoints", "required: an EndpointSource");
  if (!o.onOutcome) d.error("/onOutcome", "required: the outcome callback");
  std::set<Priority> seen;
  for (std::size_t i = 0; i < o.bands.size(); ++i) {
    const Priority p = o.bands[i].priority;
    if (!seen.insert(p).second) {
      d.error("/bands/" + std::to_string(i) + "/priority",
              "duplicate priority level " + std::to_string(p));
    }
  }
  if (o.maxBands < 1) d.error("/maxBands", "must be at least 1, but got 0");
  auto non_negative = [&](const std::optional<Duration>& v, const char* path, const char* name) {
    if (v && *v < Duration::zero()) {
      d.error(path, std::string(name) + " cannot be negative, but got " +
                        detail::flow_controller::formatDuration(*v));
    }
  };
  non_negative(o.defaultRequestTtl, "/defaultRequestTtl", "defaultRequestTtl");
  non_negative(o.noEndpointRequestTtl, "/noEndpointRequestTtl", "noEndpointRequestTtl");
  auto positive = [&](Duration v, const char* path, const char* name) {
    if (v <= Duration::zero()) {
      d.error(path, std::string(name) + " must be positive, but got " +
                        detail::flow_controller::formatDuration(v));
    }
  };
  positive(o.expiryInterval, "/expiryInterval", "expiryInterval");
  positive(o.activityWindow, "/activityWindow", "activityWindow");
  positive(o.flowIdleTimeout, "/flowIdleTimeout", "flowIdleTimeout");
  positive(o.bandIdleTimeout, "/bandIdleTimeout", "bandIdleTimeout");
  positive(o.runner.tickInterval, "/runner/tickInterval", "tickInterval");
  if (o.bandIdleTimeout < o.flowIdleTimeout) {
    d.error("/bandIdleTimeout", "must be >= flowIdleTimeout (" +
                                    detail::flow_controller::formatDuration(o.flowIdleTimeout) +
                                    "), but got " +
                                    detail::flow_controller::formatDuration(o.bandIdleTimeout));
  }
}

HOLDBACK_INLINE Result<std::unique_ptr<FlowController>> FlowController::create(
    FlowControllerOptions options) {
  Diagnostics diagnostics;
  validate(options, diagnostics);
  if (diagnostics.hasErrors()) {
    return Result<std::unique_ptr<FlowController>>::failure(std::move(diagnostics));
  }
  auto core = std::make_shared<Ticket::Core>();
  if (!options.clock) options.clock = [] { return Clock::now(); };
  core->default_ttl =
      options.defaultRequestTtl.value_or(detail::flow_controller::kDefaultRequestTtl);
  core->no_endpoint_ttl = options.noEndpointRequestTtl.value_or(core->default_ttl);
  core->opts = std::move(options);
  for (const BandOptions& b : core->opts.bands) {
    detail::flow_controller::Band* band =
        core->addBand(b.priority, b.maxRequests, b.maxBytes, b.fairness, b.ordering);
    band->initial = true;
  }
  if (core->bands.find(0) == core->bands.end()) core->addBandFromTemplate(0)->initial = true;
  if (core->opts.runner.enabled) {
    core->runner = std::thread([raw = core.get()] { raw->runLoop(); });
  }
  return Result<std::unique_ptr<FlowController>>(
      std::unique_ptr<FlowController>(new FlowController(std::move(core))), std::move(diagnostics));
}

HOLDBACK_INLINE FlowController::FlowController(std::shared_ptr<Ticket::Core> core)
    : core_(std::move(core)) {}

HOLDBACK_INLINE FlowController::~FlowController() {
  shutdown();
}

HOLDBACK_INLINE Ticket FlowController::enqueue(FlowRequest request, TimePoint now) noexcept {
  const RequestId id = core_->enqueue(std::move(request), now);
  return Ticket(core_, id);
}

HOLDBACK_INLINE Ticket FlowController::enqueue(FlowRequest request) noexcept {
  return enqueue(std::move(request), core_->opts.clock());
}

HOLDBACK_INLINE bool FlowController::cancel(RequestId id) noexcept {
  return core_->cancel(id);
}

HOLDBACK_INLINE DispatchResult FlowController::dispatchCycle(TimePoint now) noexcept {
  return core_->dispatchCycle(now);
}

HOLDBACK_INLINE std::size_t FlowController::expire(TimePoint now) noexcept {
  return core_->expire(now);
}

HOLDBACK_INLINE void FlowController::setDesiredPriorities(
    std::span<const Priority> priorities) noexcept {
  core_->setDesiredPriorities(priorities);
}

HOLDBACK_INLINE Diagnostics FlowController::reconfigure(FlowControllerOptions options) noexcept {
  return core_->reconfigure(std::move(options));
}

HOLDBACK_INLINE void FlowController::shutdown(TimePoint now) noexcept {
  core_->shutdown(now);
}

HOLDBACK_INLINE void FlowController::shutdown() noexcept {
  core_->shutdown(core_->opts.clock());
}

HOLDBACK_INLINE FlowControllerStats FlowController::stats() const {
  return core_->stats();
}

HOLDBACK_INLINE std::vector<Priority> FlowController::bandPriorities() const {
  std::lock_guard lock(core_->mu);
  std::vector<Priority> out;
  out.reserve(core_->ordered.size());
  for (const detail::flow_controller::Band* band : core_->ordered) out.push_back(band->prio);
  return out;
}

HOLDBACK_INLINE PoolRegime FlowController::poolRegime() const noexcept {
  std::lock_guard lock(core_->mu);
  return core_->regime;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
