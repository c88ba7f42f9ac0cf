// Implementation of holdback/flow/detail/band_table.hpp (compiled by src/flow.cpp, or included by
// flow_controller-inl.hpp in header-only mode); the stats snapshot is in band_table_stats-inl.hpp.
#pragma once

#include "holdback/flow/detail/band_table.hpp"
#include "holdback/flow/detail/band_table_stats-inl.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE Band::Band(Priority p, std::uint64_t max_requests, std::uint64_t max_bytes,
                           std::shared_ptr<const FairnessPolicy> fairness_policy,
                           std::shared_ptr<const OrderingPolicy> ordering_policy)
    : prio(p),
      maxRequests(max_requests == 0 ? kDefaultBandMaxRequests : max_requests),
      maxBytes(max_bytes == 0 ? kDefaultBandMaxBytes : max_bytes),
      fairness(fairness_policy ? std::move(fairness_policy) : globalStrictFairness()),
      ordering(ordering_policy ? std::move(ordering_policy) : fcfsOrdering()),
      fairness_state(fairness->newState()),
      heads(HeadLess{ItemLess{ordering.get(),
                              dynamic_cast<const FcfsOrderingPolicy*>(ordering.get()) != nullptr}}),
      track_active(fairness->type() != GlobalStrictFairnessPolicy::kType),
      track_heads(!skipsHeadIndex(fairness->type())) {}

// Only bands without the head index scan: round-robin and VTC ones, which keep the by-id index
// (`active` holds every non-empty flow), so the scan walks that.
HOLDBACK_INLINE const FlowQueueView* Band::scanBestHead() const noexcept {
  const HeadLess& less = heads.key_comp();
  const Flow* best = nullptr;
  for (const Flow* f : active) {
    if (f->items.empty()) continue;
    if (!less.item.fcfs) f->refreshHeadView();  // HeadLess's key
    if (best == nullptr || less(f, best)) best = f;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// A flow's queue (treap)

HOLDBACK_INLINE std::uint64_t ItemQueue::Rank::of(const Item* item) noexcept {
  return mixSequence(item->sequence);
}

HOLDBACK_INLINE void ItemQueue::insert(Item* x, const QueuedRequestView* view) noexcept {
  if (less_.fcfs) {
    tree_.insertWith(x, [&](const Item* other) { return less_(x, other); });
  } else if (view != nullptr) {
    tree_.insertWith(x,
                     [&](const Item* other) { return less_(*view, x, makeView(*other), other); });
  } else {  // x's view once per insert, not once per comparison
    const QueuedRequestView own = makeView(*x);
    tree_.insertWith(x, [&](const Item* other) { return less_(own, x, makeView(*other), other); });
  }
}

HOLDBACK_INLINE Item* ItemQueue::next(const Item* x) noexcept {
  return IntrusiveTreap<Item, Rank>::next(x);
}

// ---------------------------------------------------------------------------------------------
// Memory

HOLDBACK_INLINE BandTable::BandTable() = default;

HOLDBACK_INLINE BandTable::~BandTable() {
  std::vector<Item*> all;
  all.reserve(items_.size());
  items_.forEach([&](Item* item) { all.push_back(item); });
  for (Item* item : all) destroyItem(item);
}  // pool_ frees the pooled records

HOLDBACK_INLINE PreparedItem BandTable::acquire(RequestId id, const FlowRequest& request,
                                                TimePoint now) {
  // The smallest record that holds the fields the request sets.
  const bool extras = request.deadline.has_value() || request.ttftObjective.has_value() ||
                      (request.receivedTime.has_value() && *request.receivedTime != now);
  const Item::Kind kind = extras                        ? Item::kFullKind
                          : request.payload.has_value() ? Item::kWithPayload
                                                        : Item::kPlain;
  Item* item = pool_.take(kind);
  item->hash_next = item->parent = item->left = item->right = nullptr;
  item->flow = nullptr;
  item->id = id;
  item->sequence = 0;
  item->sizeBytes = request.sizeBytes;
  item->enqueueTime = now;
  item->effectiveTtl = Duration{0};
  item->requestedPriority = request.priority;
  item->kvTokens = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(request.kvTokens, 0, std::numeric_limits<std::uint32_t>::max()));
  item->flags = kind;
  if (kind == Item::kFullKind) {
    auto* f = static_cast<FullItem*>(item);
    f->receivedTime = request.receivedTime.value_or(now);
    if (request.deadline) {
      f->deadline = *request.deadline;
      f->flags |= Item::kHasDeadline;
    }
    if (request.ttftObjective) {
      f->ttftObjective = *request.ttftObjective;
      f->flags |= Item::kHasTtft;
    }
  }
  return PreparedItem{item};
}

HOLDBACK_INLINE void BandTable::release(PreparedItem&& prepared, Retired& freed) noexcept {
  pool_.recycle(std::exchange(prepared.item, nullptr), freed);
}

// ---------------------------------------------------------------------------------------------
// Topology

HOLDBACK_INLINE Band* BandTable::addBand(Priority p, std::uint64_t max_requests,
                                         std::uint64_t max_bytes,
                                         std::shared_ptr<const FairnessPolicy> fairness,
                                         std::shared_ptr<const OrderingPolicy> ordering) {
  auto band =
      std::make_unique<Band>(p, max_requests, max_bytes, std::move(fairness), std::move(ordering));
  band->counters = &counters_[p];
  Band* raw = band.get();
  bands_.emplace(p, std::move(band));
  rebuildOrder();
  return raw;
}

HOLDBACK_INLINE Band* BandTable::addBandFromTemplate(Priority p) {
  const BandTemplate& t = (p < 0 && topology_.defaultNegativeBand) ? *topology_.defaultNegativeBand
                                                                   : topology_.defaultBand;
  Band* band = addBand(p, t.maxRequests, t.maxBytes, t.fairness, t.ordering);
  band->requestTtl = t.requestTtl;
  return band;
}

HOLDBACK_INLINE void BandTable::rebuildOrder() {
  ordered_.clear();
  for (auto& [p, band] : bands_) ordered_.push_back(band.get());
}

HOLDBACK_INLINE void BandTable::removeBand(Band* band) {
  bands_.erase(band->prio);
  rebuildOrder();
}

HOLDBACK_INLINE Band* BandTable::bandOrZero(Priority p) const noexcept {
  auto it = bands_.find(p);
  if (it != bands_.end()) return it->second.get();
  return bands_.at(0).get();
}

HOLDBACK_INLINE Band* BandTable::resolve(Priority p) {
  auto it = bands_.find(p);
  if (it != bands_.end()) return it->second.get();
  if (topology_.provisionOnFirstUse && bands_.size() < topology_.maxBands) {
    return addBandFromTemplate(p);
  }
  return bands_.at(0).get();
}

HOLDBACK_INLINE std::vector<Priority> BandTable::priorities() const {
  std::vector<Priority> out;
  out.reserve(ordered_.size());
  for (const Band* band : ordered_) out.push_back(band->prio);
  return out;
}

// The built-in policies are stateless: two instances of one built-in type are the same.
HOLDBACK_INLINE bool sameBandPolicy(std::string_view a_type, std::string_view b_type, const void* a,
                                    const void* b) noexcept {
  if (a == b) return true;
  const bool builtin = a_type == FcfsOrderingPolicy::kType || a_type == EdfOrderingPolicy::kType ||
                       a_type == GlobalStrictFairnessPolicy::kType ||
                       a_type == RoundRobinFairnessPolicy::kType;
  return builtin && a_type == b_type;
}

// Gives the band in `slot` new limits and policies. A policy change rebuilds the band and moves
// every queued request over (so the queues are ordered by the new ordering policy).
HOLDBACK_INLINE Band* BandTable::reshapeBand(std::unique_ptr<Band>& slot,
                                             std::uint64_t max_requests, std::uint64_t max_bytes,
                                             std::shared_ptr<const FairnessPolicy> fairness,
                                             std::shared_ptr<const OrderingPolicy> ordering) {
  Band* old = slot.get();
  if (!fairness) fairness = globalStrictFairness();
  if (!ordering) ordering = fcfsOrdering();
  if (sameBandPolicy(fairness->type(), old->fairness->type(), fairness.get(),
                     old->fairness.get()) &&
      sameBandPolicy(ordering->type(), old->ordering->type(), ordering.get(),
                     old->ordering.get())) {
    old->maxRequests = max_requests == 0 ? kDefaultBandMaxRequests : max_requests;
    old->maxBytes = max_bytes == 0 ? kDefaultBandMaxBytes : max_bytes;
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
    auto moved = std::make_unique<Flow>(flow->id, band.get(), band->itemLess());
    moved->last_active = flow->last_active;
    moved->id_buffers = std::exchange(flow->id_buffers, kNoIdBuffer);
    Flow* raw = moved.get();
    band->flows.emplace(raw->id, std::move(moved));
    band->flow_index.insert(raw);
    while (!flow->items.empty()) {
      Item* item = flow->items.front();
      flow->items.erase(item);
      item->flow = raw;
      // The band's totals are rebuilt by addToQueue.
      addToQueue(item);
    }
  }
  slot = std::move(band);
  rebuildOrder();
  return slot.get();
}

HOLDBACK_INLINE void BandTable::applyBands(BandTopology topology,
                                           std::span<const BandOptions> declared) {
  topology_ = std::move(topology);
  std::set<Priority> seen;
  for (const BandOptions& b : declared) {
    seen.insert(b.priority);
    auto it = bands_.find(b.priority);
    if (it == bands_.end()) {
      Band* band = addBand(b.priority, b.maxRequests, b.maxBytes, b.fairness, b.ordering);
      band->initial = true;
      band->requestTtl = b.requestTtl;
    } else {
      Band* band = reshapeBand(it->second, b.maxRequests, b.maxBytes, b.fairness, b.ordering);
      band->initial = true;
      band->requestTtl = b.requestTtl;
    }
  }
  for (auto& [p, band] : bands_) {
    if (seen.count(p) > 0) continue;
    if (p == 0) {
      const BandTemplate& t = topology_.defaultBand;
      Band* zero = reshapeBand(band, t.maxRequests, t.maxBytes, t.fairness, t.ordering);
      zero->initial = true;
      zero->requestTtl = t.requestTtl;
    } else {
      band->initial = false;
    }
  }
  if (bands_.find(0) == bands_.end()) addBandFromTemplate(0)->initial = true;
  rebuildOrder();
}

HOLDBACK_INLINE std::vector<BandTable::FairnessHandover> BandTable::fairnessHandovers(
    const BandTopology& topology, std::span<const BandOptions> declared) const {
  std::vector<FairnessHandover> out;
  const auto add = [&out](std::shared_ptr<const FairnessPolicy> from,
                          std::shared_ptr<const FairnessPolicy> to) {
    if (!to) to = globalStrictFairness();
    if (!from || from == to) return;
    for (const FairnessHandover& h : out) {
      if (h.first == from && h.second == to) return;
    }
    out.emplace_back(std::move(from), std::move(to));
  };
  bool zero_declared = false;
  for (const BandOptions& b : declared) {
    zero_declared = zero_declared || b.priority == 0;
    if (const auto it = bands_.find(b.priority); it != bands_.end()) {
      add(it->second->fairness, b.fairness);
    }
  }
  if (!zero_declared) {
    if (const auto it = bands_.find(0); it != bands_.end()) {
      add(it->second->fairness, topology.defaultBand.fairness);
    }
  }
  add(topology_.defaultBand.fairness, topology.defaultBand.fairness);
  if (topology_.defaultNegativeBand) {
    add(topology_.defaultNegativeBand->fairness, topology.defaultNegativeBand
                                                     ? topology.defaultNegativeBand->fairness
                                                     : topology.defaultBand.fairness);
  }
  return out;
}

HOLDBACK_INLINE void BandTable::setDesired(std::span<const Priority> priorities) {
  desired_.assign(priorities.begin(), priorities.end());
  for (const Priority p : desired_) {
    if (bands_.find(p) == bands_.end()) addBandFromTemplate(p);
  }
  std::vector<Band*> removable;
  for (auto& [p, band] : bands_) {
    band->desired = std::find(desired_.begin(), desired_.end(), p) != desired_.end();
    if (!band->initial && !band->desired && band->queued_requests == 0) {
      removable.push_back(band.get());
    }
  }
  for (Band* band : removable) removeBand(band);
}

HOLDBACK_INLINE void BandTable::collectGarbage(TimePoint now, Duration flow_idle_timeout,
                                               Duration band_idle_timeout,
                                               std::vector<Retired>& freed) {
  // The pool's memory no request needed since the last collection goes back to the system.
  pool_.collect(freed);
  id_buffers_.collect(freed);
  {
    std::vector<Item*> old_buckets;
    items_.shrinkToFit(old_buckets);
    if (!old_buckets.empty()) freed.emplace_back().buckets = std::move(old_buckets);
  }
  std::vector<Band*> idle_bands;
  for (auto& [p, band] : bands_) {
    for (auto it = band->flows.begin(); it != band->flows.end();) {
      Flow* f = it->second.get();
      if (f->items.empty() && elapsed(f->last_active, now) >= flow_idle_timeout) {
        if (f->in_active) band->dropFromActive(f);
        band->flow_index.erase(f);
        it = band->flows.erase(it);
      } else {
        ++it;
      }
    }
    if (!band->initial && !band->desired && band->queued_requests == 0 &&
        elapsed(band->last_activity, now) >= band_idle_timeout) {
      idle_bands.push_back(band.get());
    }
  }
  for (Band* band : idle_bands) removeBand(band);
}

// ---------------------------------------------------------------------------------------------
// Queues

HOLDBACK_INLINE void BandTable::addToQueue(Item* item) noexcept {
  Flow* f = item->flow;
  Band* b = f->band;
  const ItemLess& less = f->items.key_comp();
  if (f->items.empty()) {
    f->items.insert(item);
    if (!less.fcfs) f->refreshHeadView();  // HeadLess's key
    // The hint: under arrival order a flow that becomes non-empty has the newest head, so it
    // goes last (amortized O(1) instead of O(log F) comparisons).
    b->indexHead(f);
    if (b->track_active && !f->in_active) {  // (a flow that emptied may still be there)
      f->active_pos = f->spare_active ? b->active.insert(std::move(f->spare_active)).position
                                      : b->active.insert(f).first;
      f->in_active = true;
    }
    b->active_count += 1;
    notifyHeadChanged(f);
  } else if (less.fcfs) {
    if (less(item, f->items.front())) {
      b->unindexHead(f);
      f->items.insert(item);
      b->indexHead(f);
      notifyHeadChanged(f);
    } else {
      f->items.insert(item);
    }
  } else {
    const QueuedRequestView view = makeView(*item);
    f->refreshHeadView();
    if (less(view, item, f->head_view, f->items.front())) {
      b->unindexHead(f);
      f->items.insert(item, &view);
      f->head_view = view;
      b->indexHead(f);
      notifyHeadChanged(f);
    } else {
      f->items.insert(item, &view);
    }
  }
  f->queued_bytes += item->sizeBytes;
  b->queued_requests += 1;
  b->queued_bytes += item->sizeBytes;
}

// Removes `item` from its flow and band indexes (no allocation: nodes are reused).
HOLDBACK_INLINE void BandTable::removeFromQueue(Item* item, TimePoint now) noexcept {
  Flow* f = item->flow;
  Band* b = f->band;
  if (f->items.front() == item) {
    b->unindexHead(f);  // no comparator call
    f->items.erase(item);
    if (f->items.empty()) {
      // It stays in `active` until a by-id query passes it (see the invariants).
      b->active_count -= 1;
      f->last_active = now;
    } else {
      if (!f->items.key_comp().fcfs) f->refreshHeadView();  // HeadLess's key
      b->indexHead(f);
    }
    notifyHeadChanged(f);
  } else {
    f->items.erase(item);  // no search, no comparator call
  }
  f->queued_bytes -= item->sizeBytes;
  b->queued_requests -= 1;
  b->queued_bytes -= item->sizeBytes;
  if (b->queued_requests == 0) b->last_activity = std::max(b->last_activity, now);
}

HOLDBACK_INLINE void BandTable::insert(PreparedItem&& prepared, FlowRequest& request, Band* band,
                                       Duration effective_ttl, std::uint64_t flow_hash) {
  Item* item = std::exchange(prepared.item, nullptr);
  const std::string_view flow_id(request.flowId);
  Flow* flow = band->flow_index.find(flow_id, flow_hash);
  if (flow == nullptr) {
    auto owned = std::make_unique<Flow>(std::string(request.flowId), band, band->itemLess());
    flow = owned.get();
    band->flows.emplace(flow->id, std::move(owned));
    band->flow_index.insert(flow);
  }
  if (request.flowId.capacity() > std::string().capacity()) {
    // A heap buffer holding the flow's id: kept for this request's completion, so finalizing
    // does not allocate (growing the flow's array does: a burst, not the steady state).
    id_buffers_.keep(flow->id_buffers, std::move(request.flowId));
  }
  if (std::any* payload = item->payload()) *payload = std::move(request.payload);
  item->flow = flow;
  item->effectiveTtl = effective_ttl;
  item->sequence = next_sequence_++;
  items_.insert(item);
  addToQueue(item);
  total_requests_ += 1;
  total_bytes_ += item->sizeBytes;
}

HOLDBACK_INLINE Item* BandTable::find(RequestId id) const noexcept {
  return items_.find(id);
}

HOLDBACK_INLINE void BandTable::recordQueueDuration(Band* band, Duration waited) noexcept {
  const double seconds = std::chrono::duration<double>(waited).count();
  std::size_t i = 0;
  while (i < kQueueDurationBucketsSeconds.size() && seconds > kQueueDurationBucketsSeconds[i]) {
    ++i;
  }
  BandCounters& c = *band->counters;
  c.queue_duration_buckets[i] += 1;
  c.queue_duration_sum += seconds > 0.0 ? seconds : 0.0;
}

HOLDBACK_INLINE void BandTable::countOutcome(Band* band, Priority requested,
                                             QueueOutcome outcome) noexcept {
  const auto k = static_cast<std::size_t>(outcome);
  band->counters->outcomes[k] += 1;
  outcomes_[k] += 1;
  if (requested != band->prio) requested_outcomes_.count(band->prio, requested, k);
}

HOLDBACK_INLINE Retired BandTable::finalize(Item* item, Outcome outcome, TimePoint now,
                                            Completion& c) noexcept {
  Flow* flow = item->flow;
  Band* band = flow->band;
  Retired retired;
  removeFromQueue(item, now);
  items_.erase(item);
  total_requests_ -= 1;
  total_bytes_ -= item->sizeBytes;
  countOutcome(band, item->requestedPriority, outcome.kind);
  c.id = item->id;
  // The flow id: in the buffer a request of this flow brought (every request whose id does not
  // fit the small-string buffer left one), so no allocation.
  id_buffers_.take(flow->id_buffers, c.flowId);
  c.flowId.assign(flow->id);
  c.requestedPriority = item->requestedPriority;
  c.bandPriority = band->prio;
  c.sizeBytes = item->sizeBytes;
  c.outcome = outcome;
  c.enqueueTime = item->enqueueTime;
  c.finalizedAt = now;
  if (std::any* payload = item->payload()) c.payload = std::move(*payload);
  if (outcome.kind == QueueOutcome::kDispatched) {
    recordQueueDuration(band, elapsed(c.enqueueTime, now));
  }
  pool_.recycle(item, retired);
  return retired;
}

HOLDBACK_INLINE std::vector<Item*> BandTable::allItems() const {
  std::vector<Item*> all;
  all.reserve(items_.size());
  items_.forEach([&](Item* item) { all.push_back(item); });
  std::sort(all.begin(), all.end(),
            [](const Item* a, const Item* b) { return a->sequence < b->sequence; });
  return all;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
