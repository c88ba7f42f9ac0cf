// detail::BandTable: the queued state of one flow controller. Internal (not installed API).
//
// What it holds
//   Bands by priority (highest first), each with its flows; each flow with its requests ordered by
//   the band's OrderingPolicy (arrival sequence as tie-break); an index of every queued request by
//   id; global and per-band totals; the outcome counters per priority (kept after a band is
//   removed); the desired priority set.
//
// Invariants (hold between calls)
//   - Every queued Item is in exactly one Flow's `items` and in `items_` under its id.
//   - A Band's `heads` and `active` hold exactly its non-empty flows (`heads` ordered by head
//     item, `active` by flow id); an empty flow keeps the two spare set nodes instead, so a flow
//     going empty and non-empty again does not allocate.
//   - Flow/Band/global queued_requests and queued_bytes are the sums over their items.
//   - Band 0 always exists; `ordered_` lists the bands highest first, and the scratch buffers of
//     the dispatch cycle have capacity for every band.
//   - Requests' memory (Item + index node + queue node) is recycled through a bounded pool
//     (spare_): the table's own operations do not allocate in steady state, and memory beyond the
//     pool, or unused by it between two collectGarbage() calls, is handed back as Retired, to be
//     freed after the owner's lock.
//   - Band::flow_index holds exactly the flows of Band::flows.
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
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/options.hpp"
#include "holdback/flow/stats.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct Flow;
struct Band;
struct Item;

// Orders a flow's queue: the band's OrderingPolicy, then the arrival sequence.
struct ItemLess {
  const OrderingPolicy* ordering = nullptr;
  bool operator()(const Item* a, const Item* b) const noexcept;
};

struct Item {
  QueuedRequestView view;
  RequestId id = 0;
  std::string flowId;
  Priority requestedPriority = 0;
  std::any payload;
  Flow* flow = nullptr;
  // Its position in flow->items while queued (removal without a search).
  std::set<Item*, ItemLess>::iterator position;
};

inline bool ItemLess::operator()(const Item* a, const Item* b) const noexcept {
  if (ordering->less(a->view, b->view)) return true;
  if (ordering->less(b->view, a->view)) return false;
  return a->view.sequence < b->view.sequence;
}

// Orders non-empty flows by their heads.
struct HeadLess {
  ItemLess item;
  bool operator()(const Flow* a, const Flow* b) const noexcept;
};

// The first 8 bytes of `s`, big-endian, zero-padded: comparing two prefixes as integers orders
// as comparing those bytes lexicographically (as unsigned chars, like string_view's compare), so
// equal prefixes are the only case that needs the full comparison.
inline std::uint64_t idPrefix(std::string_view s) noexcept {
  std::uint64_t p = 0;
  const std::size_t n = s.size() < 8 ? s.size() : 8;
  for (std::size_t i = 0; i < n; ++i) p = (p << 8) | static_cast<unsigned char>(s[i]);
  return n == 0 ? 0 : p << (8 * (8 - n));
}

// Orders flows by id (lexicographic), the prefix first.
struct IdLess {
  using is_transparent = void;
  struct Key {
    std::uint64_t prefix;
    std::string_view id;
  };
  static Key key(const Flow* f) noexcept;
  static Key key(std::string_view s) noexcept { return {idPrefix(s), s}; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    const Key ka = key(a);
    const Key kb = key(b);
    if (ka.prefix != kb.prefix) return ka.prefix < kb.prefix;
    return ka.id < kb.id;
  }
};

using ItemSet = std::set<Item*, ItemLess>;
using ItemIndex = std::unordered_map<RequestId, std::unique_ptr<Item>>;
using HeadSet = std::set<Flow*, HeadLess>;
using ActiveSet = std::set<Flow*, IdLess>;

struct Flow final : FlowQueueView {
  // Defined after Band (asks the band's fairness policy for the flow's state).
  Flow(std::string flow_id, Band* owner, const OrderingPolicy* ordering);
  std::string_view flowId() const noexcept override { return id; }
  std::size_t size() const noexcept override { return items.size(); }
  std::uint64_t bytes() const noexcept override { return queued_bytes; }
  const QueuedRequestView* head() const noexcept override {
    return items.empty() ? nullptr : &(*items.begin())->view;
  }

  std::string id;
  std::uint64_t id_prefix;  // idPrefix(id)
  Band* band;
  ItemSet items;
  std::uint64_t queued_bytes = 0;
  TimePoint last_active{};
  // The flow's nodes of its band's heads/active sets while it is empty (see the invariants).
  HeadSet::node_type spare_head;
  ActiveSet::node_type spare_active;
  // Its positions in those sets while it is non-empty (removal without a search).
  HeadSet::iterator head_pos;
  ActiveSet::iterator active_pos;
  // The band's fairness policy's per-flow state (FairnessPolicy::newFlowState), if it keeps one;
  // told of every head change (notifyHeadChanged). Last member: destroyed first.
  std::unique_ptr<FairnessFlowState> fairness_flow;
};

inline bool HeadLess::operator()(const Flow* a, const Flow* b) const noexcept {
  return item(*a->items.begin(), *b->items.begin());
}

inline IdLess::Key IdLess::key(const Flow* f) noexcept {
  return {f->id_prefix, f->id};
}

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
  std::size_t activeFlowCount() const noexcept override { return active_count; }
  const FlowQueueView* bestHeadFlow() const noexcept override {
    return heads.empty() ? nullptr : *heads.begin();
  }
  const FlowQueueView* firstActiveFlow() const noexcept override {
    if (!track_active) return nextNonEmptyFlow(flows.begin());
    return active.empty() ? nullptr : *active.begin();
  }
  const FlowQueueView* nextActiveFlowAfter(std::string_view flow_id) const noexcept override {
    if (!track_active) return nextNonEmptyFlow(flows.upper_bound(flow_id));
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
  // The same flows by hash of their id (the enqueue path's lookup, independent of the flow count);
  // keys view Flow::id.
  std::unordered_map<std::string_view, Flow*> flow_index;
  HeadSet heads;                 // non-empty flows by head
  ActiveSet active;              // non-empty flows by id (only while track_active)
  std::size_t active_count = 0;  // non-empty flows
  // False for the built-in global-strict fairness, which only reads bestHeadFlow(): the band
  // then skips the by-id index (an O(log F) string-ordered insert and erase each time a flow
  // becomes non-empty or empty), and the by-id views scan `flows` instead.
  bool track_active = true;
  std::size_t queued_requests = 0;
  std::uint64_t queued_bytes = 0;

  bool initial = false;
  bool desired = false;
  std::optional<TimePoint> last_arrival;
  TimePoint last_activity{};
  std::optional<double> last_ceiling;
  BandCounters* counters = nullptr;
  // The controller's demand slot for this priority (ControllerCore::demandSlotOf); a cache.
  std::uint32_t demand_slot = 0xffffffffu;

 private:
  template <class It>
  const FlowQueueView* nextNonEmptyFlow(It it) const noexcept {
    for (; it != flows.end(); ++it) {
      if (!it->second->items.empty()) return it->second.get();
    }
    return nullptr;
  }
};

inline Flow::Flow(std::string flow_id, Band* owner, const OrderingPolicy* ordering)
    : id(std::move(flow_id)), id_prefix(idPrefix(id)), band(owner), items(ItemLess{ordering}) {
  fairness_flow = owner->fairness->newFlowState(*this, owner->fairness_state.get());
}

// FairnessPolicy::headChanged for a flow whose policy keeps per-flow state.
inline void notifyHeadChanged(Flow* f) noexcept {
  if (f->fairness_flow) f->band->fairness->headChanged(*f, *f->fairness_flow);
}

// A request's memory: its Item (owned by the index node) and its flow queue's node. The table
// keeps a bounded pool of them (BandTable::spare_), so a request reuses the memory of an earlier
// one and enqueue/dispatch make no heap allocation in steady state.
struct PreparedItem {
  Item* item = nullptr;             // owned by index_node
  ItemIndex::node_type index_node;  // the id -> Item node
  ItemSet::node_type queue_node;    // the flow queue's node
};

// What finalize() removed and the pool did not keep (empty when it did); destroy it after the
// owner's lock is released (frees off the lock).
using Retired = PreparedItem;

// Requests' memory the pool keeps at most (about 300 KB); above it, finalized requests' memory is
// freed (after the lock). collectGarbage() also frees what the pool did not need since the last
// collection, so an idle controller returns it.
inline constexpr std::size_t kMaxSpareItems = 1024;

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
  // Moves a request into memory from the pool (allocating only when the pool is empty). The
  // item is not queued yet: insert() queues it, or release() returns it to the pool.
  PreparedItem acquire(RequestId id, FlowRequest&& request, TimePoint now);
  // Returns an acquired, never-inserted item's memory to the pool (or into `freed`, to free
  // after the lock).
  void release(PreparedItem&& prepared, Retired& freed) noexcept;

  // --- topology ----------------------------------------------------------------------------

  // Replaces the templates and applies the declared bands (create and reconfigure): existing
  // declared bands are reshaped, missing ones added, undeclared ones stop being initial (band 0
  // takes the default template). No queued request is lost.
  void applyBands(BandTopology topology, std::span<const BandOptions> declared);
  // The band of `p`: existing, else provisioned from the template when allowed, else band 0.
  Band* resolve(Priority p);
  // The band of `p` or band 0 (never provisions).
  [[nodiscard]] Band* bandOrZero(Priority p) const noexcept;
  [[nodiscard]] std::span<Band* const> ordered() const noexcept { return ordered_; }
  [[nodiscard]] std::vector<Priority> priorities() const;
  // The control plane's desired priorities: provisions missing bands, removes idle undesired
  // dynamic ones now.
  void setDesired(std::span<const Priority> priorities);
  // Idle flows, then idle undesired dynamically provisioned bands; the pool's memory unused since
  // the last collection goes into `freed` (free it after the lock).
  void collectGarbage(TimePoint now, Duration flow_idle_timeout, Duration band_idle_timeout,
                      std::vector<Retired>& freed);
  [[nodiscard]] std::size_t spareItems() const noexcept { return spare_.size(); }

  // --- queues ------------------------------------------------------------------------------

  // Queues a prepared item in `band` (finds or creates its flow). Fills the item's band-level
  // view fields (priority, effective TTL, sequence).
  void insert(PreparedItem&& prepared, Band* band, Duration effective_ttl);
  [[nodiscard]] Item* find(RequestId id) const noexcept;
  // Removes a queued item from every index, counts its outcome, fills `completion`; the memory
  // goes back to the pool, or comes back in the Retired value when the pool is full.
  Retired finalize(Item* item, Outcome outcome, TimePoint now, Completion& completion) noexcept;
  // Counts the outcome of a request that was never queued (a rejection) in `band`.
  void countOutcome(Band* band, QueueOutcome outcome) noexcept;
  // Every queued item, in arrival order.
  [[nodiscard]] std::vector<Item*> allItems() const;
  template <class F>
  void forEachItem(F&& f) const {
    for (const auto& [p, band] : bands_)
      for (const auto& [id, flow] : band->flows)
        for (Item* item : flow->items) f(item);
  }

  [[nodiscard]] std::size_t totalRequests() const noexcept { return total_requests_; }
  [[nodiscard]] std::uint64_t totalBytes() const noexcept { return total_bytes_; }

  // Per-band and global counters into `out` (bands highest first).
  void fillStats(FlowControllerStats& out) const;

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
  static void addToQueue(Item* item, ItemSet::node_type&& node);
  static ItemSet::node_type removeFromQueue(Item* item, TimePoint now) noexcept;
  static void recordQueueDuration(Band* band, Duration waited) noexcept;

  BandTopology topology_;
  std::map<Priority, std::unique_ptr<Band>, std::greater<>> bands_;
  std::vector<Band*> ordered_;  // highest first
  std::map<Priority, BandCounters> counters_;
  std::array<std::uint64_t, kNumQueueOutcomes> outcomes_{};
  ItemIndex items_;
  ItemIndex scratch_index_;          // builds index nodes (always empty between calls)
  std::vector<PreparedItem> spare_;  // the pool, at most kMaxSpareItems
  std::size_t spare_low_water_ = 0;  // the pool's smallest size since the last collectGarbage
  void recycle(PreparedItem&& memory, Retired& freed) noexcept;
  std::vector<Priority> desired_;
  std::size_t total_requests_ = 0;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t next_sequence_ = 1;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
