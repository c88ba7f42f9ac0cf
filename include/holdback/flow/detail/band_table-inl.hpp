// Implementation of holdback/flow/detail/band_table.hpp (compiled by src/flow.cpp, or included by
// flow_controller-inl.hpp in header-only mode).
#pragma once

#include "holdback/flow/detail/band_table.hpp"

#include <algorithm>
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
      heads(HeadLess{ItemLess{ordering.get()}}),
      track_active(fairness->type() != GlobalStrictFairnessPolicy::kType) {}

// ---------------------------------------------------------------------------------------------
// Memory

HOLDBACK_INLINE BandTable::BandTable() {
  spare_.reserve(kMaxSpareItems);  // the pool never grows its own array later
}

HOLDBACK_INLINE PreparedItem BandTable::acquire(RequestId id, FlowRequest&& request,
                                                TimePoint now) {
  PreparedItem out;
  if (!spare_.empty()) {
    out = std::move(spare_.back());
    spare_.pop_back();
    if (spare_.size() < spare_low_water_) spare_low_water_ = spare_.size();
    out.index_node.key() = id;
  } else {  // the pool is empty: the table is growing (not the steady state)
    auto item = std::make_unique<Item>();
    out.item = item.get();
    // scratch_index_'s bucket array survives extract(): one allocation for the node.
    out.index_node = scratch_index_.extract(scratch_index_.emplace(id, std::move(item)).first);
    ItemSet scratch_queue(ItemLess{nullptr});  // one element: the comparator is never called
    out.queue_node = scratch_queue.extract(scratch_queue.insert(out.item).first);
  }
  Item* raw = out.item;
  raw->id = id;
  raw->flowId = std::move(request.flowId);
  raw->requestedPriority = request.priority;
  raw->payload = std::move(request.payload);
  raw->flow = nullptr;
  raw->view = QueuedRequestView{};
  raw->view.flowId = raw->flowId;
  raw->view.sizeBytes = request.sizeBytes;
  raw->view.enqueueTime = now;
  raw->view.deadline = request.deadline;
  raw->view.receivedTime = request.receivedTime.value_or(now);
  raw->view.ttftObjective = request.ttftObjective;
  return out;
}

HOLDBACK_INLINE void BandTable::recycle(PreparedItem&& memory, Retired& freed) noexcept {
  Item* item = memory.item;
  item->payload.reset();  // the host's payload is never kept alive by the pool
  item->flowId.clear();
  if (spare_.size() < kMaxSpareItems) {
    spare_.push_back(std::move(memory));  // capacity reserved: no allocation
  } else {
    freed = std::move(memory);
  }
}

HOLDBACK_INLINE void BandTable::release(PreparedItem&& prepared, Retired& freed) noexcept {
  recycle(std::move(prepared), freed);
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
  return addBand(p, t.maxRequests, t.maxBytes, t.fairness, t.ordering);
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
    auto moved = std::make_unique<Flow>(flow->id, band.get(), band->ordering.get());
    moved->last_active = flow->last_active;
    Flow* raw = moved.get();
    band->flows.emplace(raw->id, std::move(moved));
    band->flow_index.emplace(std::string_view(raw->id), raw);
    while (!flow->items.empty()) {
      auto node = flow->items.extract(flow->items.begin());
      Item* item = node.value();
      item->flow = raw;
      item->view.priority = band->prio;
      // The band's totals are rebuilt by addToQueue.
      addToQueue(item, std::move(node));
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
      addBand(b.priority, b.maxRequests, b.maxBytes, b.fairness, b.ordering)->initial = true;
    } else {
      reshapeBand(it->second, b.maxRequests, b.maxBytes, b.fairness, b.ordering)->initial = true;
    }
  }
  for (auto& [p, band] : bands_) {
    if (seen.count(p) > 0) continue;
    if (p == 0) {
      const BandTemplate& t = topology_.defaultBand;
      reshapeBand(band, t.maxRequests, t.maxBytes, t.fairness, t.ordering)->initial = true;
    } else {
      band->initial = false;
    }
  }
  if (bands_.find(0) == bands_.end()) addBandFromTemplate(0)->initial = true;
  rebuildOrder();
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
  for (std::size_t i = 0; i < spare_low_water_ && !spare_.empty(); ++i) {
    freed.push_back(std::move(spare_.back()));
    spare_.pop_back();
  }
  spare_low_water_ = spare_.size();
  std::vector<Band*> idle_bands;
  for (auto& [p, band] : bands_) {
    for (auto it = band->flows.begin(); it != band->flows.end();) {
      Flow* f = it->second.get();
      if (f->items.empty() && elapsed(f->last_active, now) >= flow_idle_timeout) {
        band->flow_index.erase(std::string_view(f->id));
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

HOLDBACK_INLINE void BandTable::addToQueue(Item* item, ItemSet::node_type&& node) {
  Flow* f = item->flow;
  Band* b = f->band;
  if (f->items.empty()) {
    item->position = f->items.insert(std::move(node)).position;
    // The hint: under arrival order a flow that becomes non-empty has the newest head, so it
    // goes last (amortized O(1) instead of O(log F) comparisons).
    f->head_pos = f->spare_head ? b->heads.insert(b->heads.end(), std::move(f->spare_head))
                                : b->heads.insert(b->heads.end(), f);
    if (b->track_active) {
      f->active_pos = f->spare_active ? b->active.insert(std::move(f->spare_active)).position
                                      : b->active.insert(f).first;
    }
    b->active_count += 1;
    notifyHeadChanged(f);
  } else if (f->items.key_comp()(item, *f->items.begin())) {
    auto head_node = b->heads.extract(f->head_pos);
    item->position = f->items.insert(std::move(node)).position;
    f->head_pos = b->heads.insert(std::move(head_node)).position;
    notifyHeadChanged(f);
  } else {
    item->position = f->items.insert(std::move(node)).position;
  }
  f->queued_bytes += item->view.sizeBytes;
  b->queued_requests += 1;
  b->queued_bytes += item->view.sizeBytes;
}

// Removes `item` from its flow and band indexes (no allocation: nodes are reused or returned).
HOLDBACK_INLINE ItemSet::node_type BandTable::removeFromQueue(Item* item, TimePoint now) noexcept {
  Flow* f = item->flow;
  Band* b = f->band;
  ItemSet::node_type node;
  if (*f->items.begin() == item) {
    auto head_node = b->heads.extract(f->head_pos);  // by position: no comparator call
    node = f->items.extract(f->items.begin());
    if (f->items.empty()) {
      if (b->track_active) f->spare_active = b->active.extract(f->active_pos);
      b->active_count -= 1;
      f->spare_head = std::move(head_node);
      f->last_active = now;
    } else {
      f->head_pos = b->heads.insert(std::move(head_node)).position;
    }
    notifyHeadChanged(f);
  } else {
    node = f->items.extract(item->position);  // no search, no comparator call
  }
  f->queued_bytes -= item->view.sizeBytes;
  b->queued_requests -= 1;
  b->queued_bytes -= item->view.sizeBytes;
  if (b->queued_requests == 0) b->last_activity = std::max(b->last_activity, now);
  return node;
}

HOLDBACK_INLINE void BandTable::insert(PreparedItem&& prepared, Band* band,
                                       Duration effective_ttl) {
  Item* item = prepared.item;
  auto flow_it = band->flow_index.find(std::string_view(item->flowId));
  if (flow_it == band->flow_index.end()) {
    auto flow = std::make_unique<Flow>(item->flowId, band, band->ordering.get());
    Flow* raw = flow.get();
    band->flows.emplace(flow->id, std::move(flow));
    flow_it = band->flow_index.emplace(std::string_view(raw->id), raw).first;
  }
  item->flow = flow_it->second;
  item->view.priority = band->prio;
  item->view.effectiveTtl = effective_ttl;
  item->view.sequence = next_sequence_++;
  items_.insert(std::move(prepared.index_node));
  addToQueue(item, std::move(prepared.queue_node));
  total_requests_ += 1;
  total_bytes_ += item->view.sizeBytes;
}

HOLDBACK_INLINE Item* BandTable::find(RequestId id) const noexcept {
  auto it = items_.find(id);
  return it == items_.end() ? nullptr : it->second.get();
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

HOLDBACK_INLINE void BandTable::countOutcome(Band* band, QueueOutcome outcome) noexcept {
  const auto k = static_cast<std::size_t>(outcome);
  band->counters->outcomes[k] += 1;
  outcomes_[k] += 1;
}

HOLDBACK_INLINE Retired BandTable::finalize(Item* item, Outcome outcome, TimePoint now,
                                            Completion& c) noexcept {
  Band* band = item->flow->band;
  Retired retired;
  ItemSet::node_type queue_node = removeFromQueue(item, now);
  total_requests_ -= 1;
  total_bytes_ -= item->view.sizeBytes;
  countOutcome(band, outcome.kind);
  c.id = item->id;
  c.flowId = std::move(item->flowId);
  c.requestedPriority = item->requestedPriority;
  c.bandPriority = band->prio;
  c.sizeBytes = item->view.sizeBytes;
  c.outcome = outcome;
  c.enqueueTime = item->view.enqueueTime;
  c.finalizedAt = now;
  c.payload = std::move(item->payload);
  if (outcome.kind == QueueOutcome::kDispatched) {
    recordQueueDuration(band, elapsed(c.enqueueTime, now));
  }
  PreparedItem memory;
  memory.item = item;
  memory.queue_node = std::move(queue_node);
  memory.index_node = items_.extract(c.id);
  recycle(std::move(memory), retired);
  return retired;
}

HOLDBACK_INLINE std::vector<Item*> BandTable::allItems() const {
  std::vector<Item*> all;
  all.reserve(items_.size());
  for (const auto& [id, item] : items_) all.push_back(item.get());
  std::sort(all.begin(), all.end(),
            [](const Item* a, const Item* b) { return a->view.sequence < b->view.sequence; });
  return all;
}

HOLDBACK_INLINE void BandTable::fillStats(FlowControllerStats& out) const {
  out.queuedRequests = total_requests_;
  out.queuedBytes = total_bytes_;
  out.outcomes = outcomes_;
  out.bands.reserve(counters_.size());
  for (auto it = counters_.rbegin(); it != counters_.rend(); ++it) {  // highest first
    const auto& [p, c] = *it;
    BandStats b;
    b.priority = p;
    b.gatedCycles = c.gated_cycles;
    b.outcomes = c.outcomes;
    b.queueDurationBuckets = c.queue_duration_buckets;
    b.queueDurationSumSeconds = c.queue_duration_sum;
    auto band_it = bands_.find(p);
    b.provisioned = band_it != bands_.end();
    if (b.provisioned) {
      const Band& band = *band_it->second;
      b.queuedRequests = band.queued_requests;
      b.queuedBytes = band.queued_bytes;
      b.maxRequests = band.maxRequests;
      b.maxBytes = band.maxBytes;
      b.flows = band.flows.size();
      b.activeFlows = band.active_count;
      b.lastCeiling = band.last_ceiling;
    }
    out.bands.push_back(b);
  }
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
