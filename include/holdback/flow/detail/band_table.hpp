// detail::BandTable: the queued state of one flow controller. Internal (not installed API).
//
// What it holds
//   Bands by priority (highest first), each with its flows; each flow with its requests ordered by
//   the band's OrderingPolicy (arrival sequence as tie-break); an index of every queued request by
//   id; global and per-band totals; the outcome counters per priority (kept after a band is
//   removed); the desired priority set.
//
// Built from the containers of flow/detail/: the records and their pools (item_pool.hpp), the
// id index (id_index.hpp), a band's orders and indexes (band_indexes.hpp: treaps of
// intrusive_treap.hpp, a FlatIndex of flat_index.hpp). The stats snapshot is implemented in
// band_table_stats-inl.hpp.
//
// Invariants (hold between calls)
//   - Every queued Item is in exactly one Flow's `items` (linked through its own treap links) and
//     in `items_` under its id (chained through its own hash link): a request is one allocation.
//   - While track_heads (every band but the built-in round-robin's), a Band's `heads` holds
//     exactly its non-empty flows, ordered by head item, through the flows' own links; otherwise
//     it is empty. While track_active, `active` holds every non-empty flow by id, and may still
//     hold flows that became empty (Flow::in_active): they are dropped lazily, by the by-id queries
//     that walk over them, so a flow that empties and refills between two picks (the common case
//     under round-robin) is neither erased nor re-inserted. A flow outside `active` keeps its
//     spare node, so leaving and re-entering does not allocate.
//   - Flow/Band/global queued_requests and queued_bytes are the sums over their items.
//   - A flow's id is stored once, in the Flow; a queued request whose flow id string was on the
//     heap left that buffer in its flow's list of id buffers (one each), which its completion
//     takes back, so a finalization does not allocate.
//   - Band 0 always exists; `ordered_` lists the bands highest first, and the scratch buffers of
//     the dispatch cycle have capacity for every band.
//   - Records are recycled through bounded pools (pool_: one per record size): the table's own
//     operations do not allocate in steady state, and memory beyond the pools, or unused by them
//     between two collectGarbage() calls, is handed back as Retired, to be freed after the
//     owner's lock.
//   - Band::flow_index holds exactly the flows of Band::flows (by Flow::id_hash).
//
// Locking: none of its own. The owner (ControllerCore) guards the whole table with its mutex
// (HOLDBACK_GUARDED_BY), and every method must be called with that lock held.
//
// Thread safety: thread-compatible.
#pragma once

#include <any>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "holdback/flow/admission.hpp"
#include "holdback/flow/detail/band_indexes.hpp"
#include "holdback/flow/detail/id_index.hpp"
#include "holdback/flow/detail/item_pool.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/options.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"
#include "holdback/flow/stats.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The built-in fairness types that never read bestHeadFlow(): their bands skip the head index.
inline bool skipsHeadIndex(std::string_view type) noexcept {
  return type == RoundRobinFairnessPolicy::kType || type == VtcFairnessPolicy::kType;
}

struct Flow final : FlowQueueView {
  // Defined after Band (asks the band's fairness policy for the flow's state).
  Flow(std::string flow_id, Band* owner, ItemLess less);
  std::string_view flowId() const noexcept override { return id; }
  std::size_t size() const noexcept override { return items.size(); }
  std::uint64_t bytes() const noexcept override { return queued_bytes; }
  // Valid until the flow's queue changes (fairness policies read it within one pick).
  const QueuedRequestView* head() const noexcept override {
    if (items.empty()) return nullptr;
    refreshHeadView();
    return &head_view;
  }
  // head_view := the view of the head, unless it already is (sequences are unique).
  void refreshHeadView() const noexcept;

  std::string id;
  std::uint64_t id_prefix;  // idPrefix(id)
  Band* band;
  ItemQueue items;
  std::uint64_t queued_bytes = 0;
  TimePoint last_active{};
  // Its links in its band's HeadIndex while it is non-empty, and its treap priority there.
  Flow* parent = nullptr;
  Flow* left = nullptr;
  Flow* right = nullptr;
  std::uint64_t head_rank = 0;
  // The hash of `id` (FlowIndex).
  std::uint64_t id_hash;
  // Its node of its band's active set while outside it (see the invariants), its position there
  // while inside (removal without a search).
  ActiveSet::node_type spare_active;
  ActiveSet::iterator active_pos;
  bool in_active = false;
  // Its list in BandTable's id buffers (kNoIdBuffer: empty): the heap buffers of its queued
  // requests' flow-id strings (ids longer than the small-string buffer), one per such request,
  // moved into its completion (Completion::flowId), so a finalization does not allocate.
  std::uint32_t id_buffers = kNoIdBuffer;
  // The head's view: head()'s result, and HeadLess's key under a policy other than FCFS (then
  // kept current whenever the head changes).
  mutable QueuedRequestView head_view;
  // The band's fairness policy's per-flow state (FairnessPolicy::newFlowState), if it keeps one;
  // told of every head change (notifyHeadChanged). Last member: destroyed first.
  std::unique_ptr<FairnessFlowState> fairness_flow;
};

inline bool HeadLess::operator()(const Flow* a, const Flow* b) const noexcept {
  if (item.fcfs) return item(a->items.front(), b->items.front());
  return item(a->head_view, a->items.front(), b->head_view, b->items.front());
}

inline IdLess::Key IdLess::key(const Flow* f) noexcept {
  return {f->id_prefix, f->id};
}

inline std::uint64_t HeadIndex::Rank::of(const Flow* f) noexcept {
  return f->head_rank;
}

inline void HeadIndex::insert(Flow* f) noexcept {
  f->head_rank = mixSequence(f->items.front()->sequence);
  tree_.insertWith(f, [&](const Flow* other) { return less_(f, other); });
}

inline void HeadIndex::erase(Flow* f) noexcept {
  tree_.erase(f);
}

// The outcomes of requests placed in a band other than their requested priority's, by (band,
// requested priority), for at most kRequestedPriorityLabelLimit pairs (the first seen, kept
// for the table's lifetime so the counters never go backwards); the rest are only counted in
// `untracked`. Fixed storage: counting never allocates.
struct RequestedOutcomeTable {
  [[nodiscard]] static std::uint64_t key(Priority band, Priority requested) noexcept {
    return (std::uint64_t(std::uint32_t(band)) << 32) | std::uint32_t(requested);
  }
  void count(Priority band, Priority requested, std::size_t outcome) noexcept {
    const std::uint64_t k = key(band, requested);
    for (std::size_t i = 0; i < size; ++i) {
      if (keys[i] == k) {
        counts[i][outcome] += 1;
        return;
      }
    }
    if (size == keys.size()) {
      untracked += 1;
      return;
    }
    keys[size] = k;
    counts[size] = {};
    counts[size][outcome] = 1;
    size += 1;
  }
  std::array<std::uint64_t, kRequestedPriorityLabelLimit> keys{};
  std::array<std::array<std::uint64_t, kNumQueueOutcomes>, kRequestedPriorityLabelLimit> counts{};
  std::size_t size = 0;
  std::uint64_t untracked = 0;
};

struct BandCounters {
  std::uint64_t gated_cycles = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes{};
  std::array<std::uint64_t, kQueueDurationBucketsSeconds.size() + 1> queue_duration_buckets{};
  double queue_duration_sum = 0.0;
};

struct Band final : BandView {
  Band(Priority p, std::uint64_t max_requests, std::uint64_t max_bytes,
       std::shared_ptr<const FairnessPolicy> fairness_policy,
       std::shared_ptr<const OrderingPolicy> ordering_policy);

  Priority priority() const noexcept override { return prio; }
  // The order of this band's flow queues.
  [[nodiscard]] ItemLess itemLess() const noexcept { return heads.key_comp().item; }
  std::size_t activeFlowCount() const noexcept override { return active_count; }
  // The index's first flow; without the index (round-robin bands) a scan of the non-empty flows.
  const FlowQueueView* bestHeadFlow() const noexcept override {
    return track_heads ? heads.front() : scanBestHead();
  }
  const FlowQueueView* firstActiveFlow() const noexcept override {
    if (!track_active) return nextNonEmptyFlow(flows.begin());
    return firstNonEmptyActive(active.begin());
  }
  // After the flow returned last (the round-robin cursor, usually): its successor in `active`,
  // without a search by id.
  const FlowQueueView* nextActiveFlowAfter(std::string_view flow_id) const noexcept override {
    if (!track_active) return nextNonEmptyFlow(flows.upper_bound(flow_id));
    if (last_returned != nullptr && last_returned->in_active && last_returned->id == flow_id) {
      return firstNonEmptyActive(std::next(last_returned->active_pos));
    }
    return firstNonEmptyActive(active.upper_bound(flow_id));
  }
  // Takes an empty flow out of `active` (keeping its node).
  void dropFromActive(Flow* f) const noexcept;

  Priority prio;
  std::uint64_t maxRequests;
  std::uint64_t maxBytes;
  Duration requestTtl{0};  // the band's queue budget, 0 = none (BandOptions::requestTtl)
  std::shared_ptr<const FairnessPolicy> fairness;
  std::shared_ptr<const OrderingPolicy> ordering;
  std::unique_ptr<FairnessState> fairness_state;

  std::map<std::string, std::unique_ptr<Flow>, std::less<>> flows;
  // The same flows by hash of their id (the enqueue path's lookup, independent of the flow count);
  // keys view Flow::id.
  FlowIndex flow_index;
  HeadIndex heads;  // non-empty flows by head (only while track_heads)
  // Non-empty flows by id, and some empty ones (only while track_active; see the invariants).
  // Mutable: the const by-id queries drop the empty flows they pass.
  mutable ActiveSet active;
  // The flow the by-id queries returned last (nullptr when it was dropped or collected).
  mutable const Flow* last_returned = nullptr;
  std::size_t active_count = 0;  // non-empty flows
  // False for the built-in global-strict fairness, which only reads bestHeadFlow(): the band
  // then skips the by-id index (an O(log F) string-ordered insert and erase each time a flow
  // becomes non-empty or empty), and the by-id views scan `flows` instead.
  bool track_active = true;
  // False for the built-in round-robin and VTC fairness, which do not read bestHeadFlow(): the
  // band then skips the head index (a treap erase and insert each time a flow's head changes),
  // and bestHeadFlow() (the evictor's) scans `active` instead (skipsHeadIndex).
  bool track_heads = true;
  // The head index's updates, skipped without it (a flow whose head changed: unindex, change,
  // index again).
  void indexHead(Flow* f) noexcept {
    if (track_heads) heads.insert(f);
  }
  void unindexHead(Flow* f) noexcept {
    if (track_heads) heads.erase(f);
  }
  std::size_t queued_requests = 0;
  std::uint64_t queued_bytes = 0;

  bool initial = false;
  bool desired = false;
  std::optional<TimePoint> last_arrival;
  TimePoint last_activity{};
  std::optional<double> last_ceiling;
  std::uint64_t wfq_pass = 0;  // BandScheduler's pass (weighted-fair band scheduling)
  BandCounters* counters = nullptr;
  // The controller's demand slot for this priority (DemandTracker::slotOf); a cache.
  std::uint32_t demand_slot = 0xffffffffu;

 private:
  const FlowQueueView* scanBestHead() const noexcept;
  template <class It>
  const FlowQueueView* nextNonEmptyFlow(It it) const noexcept {
    for (; it != flows.end(); ++it) {
      if (!it->second->items.empty()) return it->second.get();
    }
    return nullptr;
  }
  // The first non-empty flow of `active` from `it` on, dropping the empty ones before it.
  const FlowQueueView* firstNonEmptyActive(ActiveSet::iterator it) const noexcept;
};

inline Flow::Flow(std::string flow_id, Band* owner, ItemLess less)
    : id(std::move(flow_id)),
      id_prefix(idPrefix(id)),
      band(owner),
      items(less),
      id_hash(FlowIndex::hashOf(id)) {
  fairness_flow = owner->fairness->newFlowState(*this, owner->fairness_state.get());
}

inline Flow* FlowIndex::find(std::string_view id, std::uint64_t hash) const noexcept {
  const Slot* s = index_.find(
      hash, [&](const Slot& e) { return e.hash == hash && std::string_view(e.flow->id) == id; });
  return s == nullptr ? nullptr : s->flow;
}

inline void FlowIndex::insert(Flow* f) {
  index_.insert(Slot{f->id_hash, f});
}

inline void FlowIndex::erase(const Flow* f) noexcept {
  (void)index_.erase(f->id_hash, [f](const Slot& e) { return e.flow == f; });
}

inline void Band::dropFromActive(Flow* f) const noexcept {
  if (last_returned == f) last_returned = nullptr;
  f->spare_active = active.extract(f->active_pos);
  f->in_active = false;
}

inline const FlowQueueView* Band::firstNonEmptyActive(ActiveSet::iterator it) const noexcept {
  while (it != active.end()) {
    Flow* f = *it;
    ++it;  // extract() invalidates only f's position
    if (!f->items.empty()) {
      last_returned = f;
      return f;
    }
    dropFromActive(f);
  }
  return nullptr;
}

// FairnessPolicy::headChanged for a flow whose policy keeps per-flow state.
inline void notifyHeadChanged(Flow* f) noexcept {
  if (f->fairness_flow) f->band->fairness->headChanged(*f, *f->fairness_flow);
}

// Record and ordering helpers that need Flow and Band complete.
inline QueuedRequestView makeView(const Item& item) noexcept {
  QueuedRequestView v;
  v.flowId = item.flow->id;
  v.priority = item.flow->band->prio;
  v.sizeBytes = item.sizeBytes;
  v.enqueueTime = item.enqueueTime;
  v.effectiveTtl = item.effectiveTtl;
  v.deadline = item.deadline();
  v.sequence = item.sequence;
  v.receivedTime = item.receivedTime();
  v.ttftObjective = item.ttftObjective();
  v.kvTokens = item.kvTokens;
  return v;
}

inline bool ItemLess::operator()(const QueuedRequestView& va, const Item* a,
                                 const QueuedRequestView& vb, const Item* b) const noexcept {
  if (ordering->less(va, vb)) return true;
  if (ordering->less(vb, va)) return false;
  return a->sequence < b->sequence;
}

inline bool ItemLess::operator()(const Item* a, const Item* b) const noexcept {
  if (fcfs) {  // FcfsOrderingPolicy::less, on the records
    if (a->enqueueTime != b->enqueueTime) return a->enqueueTime < b->enqueueTime;
    return a->sequence < b->sequence;
  }
  return (*this)(makeView(*a), a, makeView(*b), b);
}

inline void Flow::refreshHeadView() const noexcept {
  const Item* front = items.front();
  if (head_view.sequence != front->sequence) head_view = makeView(*front);
}

// A request's record taken from the pool (or allocated when the pool is empty) and not queued
// yet.
struct PreparedItem {
  Item* item = nullptr;
};

// The band topology's reloadable settings.
struct BandTopology {
  BandTemplate defaultBand;
  std::optional<BandTemplate> defaultNegativeBand;
  bool provisionOnFirstUse = true;
  std::size_t maxBands = kDefaultMaxBands;
};

class BandTable {
 public:
  BandTable();
  ~BandTable();  // frees every record, queued or pooled
  BandTable(const BandTable&) = delete;
  BandTable& operator=(const BandTable&) = delete;
  // Copies a request's fields into a record from the pool (allocating only when the pool is
  // empty); leaves its flow id and payload in `request`. The record is not queued yet: insert()
  // queues it, or release() returns it to the pool.
  PreparedItem acquire(RequestId id, const FlowRequest& request, TimePoint now);
  // Returns an acquired, never-inserted record to the pool (or into `freed`, to free after the
  // lock).
  void release(PreparedItem&& prepared, Retired& freed) noexcept;

  // --- topology ----------------------------------------------------------------------------

  // Replaces the templates and applies the declared bands (create and reconfigure): existing
  // declared bands are reshaped, missing ones added, undeclared ones stop being initial (band 0
  // takes the default template). No queued request is lost.
  void applyBands(BandTopology topology, std::span<const BandOptions> declared);
  // The fairness policies applyBands(topology, declared) would replace, with their replacements
  // (distinct pairs, the replaced one first): declared bands that exist, band 0 when it takes
  // the default template, and the two templates.
  using FairnessHandover =
      std::pair<std::shared_ptr<const FairnessPolicy>, std::shared_ptr<const FairnessPolicy>>;
  [[nodiscard]] std::vector<FairnessHandover> fairnessHandovers(
      const BandTopology& topology, std::span<const BandOptions> declared) const;
  // The band of `p`: existing, else provisioned from the template when allowed, else band 0.
  Band* resolve(Priority p);
  // The band of `p` or band 0 (never provisions).
  [[nodiscard]] Band* bandOrZero(Priority p) const noexcept;
  // The band a request of priority `p` would be queued in now, without provisioning: its own,
  // band 0 when it would not get one (provisioning off or maxBands reached), null when it would
  // get a new band (nothing to read yet).
  [[nodiscard]] const Band* placementOf(Priority p) const noexcept;
  [[nodiscard]] std::span<Band* const> ordered() const noexcept { return ordered_; }
  [[nodiscard]] std::vector<Priority> priorities() const;
  // The control plane's desired priorities: provisions missing bands, removes idle undesired
  // dynamic ones now.
  void setDesired(std::span<const Priority> priorities);
  // Idle flows, then idle undesired dynamically provisioned bands; the pool's memory unused since
  // the last collection goes into `freed` (free it after the lock).
  void collectGarbage(TimePoint now, Duration flow_idle_timeout, Duration band_idle_timeout,
                      std::vector<Retired>& freed);
  [[nodiscard]] std::size_t spareItems() const noexcept { return pool_.size(); }

  // --- queues ------------------------------------------------------------------------------

  // Queues a prepared record in `band` (finds or creates its flow); moves the request's payload
  // into the record and its flow id into the new flow or the pool of id buffers (the request
  // keeps it when neither takes it). Fills the effective TTL and the sequence. `flow_hash`:
  // FlowIndex::hashOf(request.flowId), computed by the caller before taking its lock.
  void insert(PreparedItem&& prepared, FlowRequest& request, Band* band, Duration effective_ttl,
              std::uint64_t flow_hash);
  [[nodiscard]] Item* find(RequestId id) const noexcept;
  // Removes a queued record from every index, counts its outcome, fills `completion` (its flow
  // id in a pooled buffer when one fits); the record goes back to the pool, or comes back in the
  // Retired value when the pool is full.
  Retired finalize(Item* item, Outcome outcome, TimePoint now, Completion& completion) noexcept;
  // Counts the outcome of a request placed (or rejected) in `band` that asked for `requested`.
  void countOutcome(Band* band, Priority requested, QueueOutcome outcome) noexcept;
  // Every queued item, in arrival order.
  [[nodiscard]] std::vector<Item*> allItems() const;
  template <class F>
  void forEachItem(F&& f) const {
    for (const auto& [p, band] : bands_)
      for (const auto& [id, flow] : band->flows) flow->items.forEach(f);
  }

  [[nodiscard]] std::size_t totalRequests() const noexcept { return total_requests_; }
  [[nodiscard]] std::uint64_t totalBytes() const noexcept { return total_bytes_; }

  // Per-band and global counters into `out` (bands highest first); with `fairness_id_labels` >
  // 0, the per-flow queue figures for that many flow ids (BandStats::flowQueues).
  void fillStats(FlowControllerStats& out, std::size_t fairness_id_labels = 0) const;

 private:
  Band* addBand(Priority p, std::uint64_t max_requests, std::uint64_t max_bytes,
                std::shared_ptr<const FairnessPolicy> fairness,
                std::shared_ptr<const OrderingPolicy> ordering);
  Band* addBandFromTemplate(Priority p);
  Band* reshapeBand(std::unique_ptr<Band>& slot, std::uint64_t max_requests,
                    std::uint64_t max_bytes, std::shared_ptr<const FairnessPolicy> fairness,
                    std::shared_ptr<const OrderingPolicy> ordering);
  void removeBand(Band* band);
  void rebuildOrder();
  void fillFlowQueues(FlowControllerStats& out, std::size_t limit) const;
  static void addToQueue(Item* item) noexcept;
  static void removeFromQueue(Item* item, TimePoint now) noexcept;
  static void recordQueueDuration(Band* band, Duration waited) noexcept;

  BandTopology topology_;
  std::map<Priority, std::unique_ptr<Band>, std::greater<>> bands_;
  std::vector<Band*> ordered_;  // highest first
  std::map<Priority, BandCounters> counters_;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes_{};
  RequestedOutcomeTable requested_outcomes_;
  IdIndex items_;
  ItemPool pool_;
  // Flow-id buffers (Flow::id_buffers): one per queued request whose flow id is on the heap; the
  // array grows with the number of such requests (a burst) and is released by a collection that
  // finds none queued.
  IdBufferPool id_buffers_;
  std::vector<Priority> desired_;
  std::size_t total_requests_ = 0;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t next_sequence_ = 1;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
