// Implementation of holdback/flow/plugins/program_aware_fairness.hpp, the band index: the
// per-flow and per-band state (FlowEntry, BandIndex), how a flow enters, leaves and moves in its
// band's index, and the pick over it. Included by program_aware_fairness-inl.hpp, which holds
// the rest (options, the program table, decay, reload, observability).
#pragma once

#include "holdback/flow/plugins/program_aware_fairness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE double secondsOf(Duration d) noexcept {
  return std::chrono::duration<double>(d).count();
}

}  // namespace detail

// A flow of a band using the policy, and its node in the band's index. Its fields are only
// touched under the policy's mutex.
struct ProgramAwareFairnessPolicy::FlowEntry final : FairnessFlowState {
  FlowEntry(const ProgramAwareFairnessPolicy* owner, BandIndex* index, const FlowQueueView* view,
            std::uint64_t priority)
      : policy(owner), band(index), flow(view), id(view->flowId()), prio(priority) {}
  ~FlowEntry() override {
    MutexLock lock(policy->mu_);
    if (linked) policy->unlinkLocked(*this);
  }
  FlowEntry(const FlowEntry&) = delete;
  FlowEntry& operator=(const FlowEntry&) = delete;

  // The index's order: service, then flow id (so its first entry is the scan's choice among
  // equal services).
  [[nodiscard]] bool before(const FlowEntry& o) const noexcept {
    if (service != o.service) return service < o.service;
    return id < o.id;
  }
  // The head order: enqueue time, then flow id.
  [[nodiscard]] bool olderThan(const FlowEntry& o) const noexcept {
    if (head_enqueue != o.head_enqueue) return head_enqueue < o.head_enqueue;
    return id < o.id;
  }

  const ProgramAwareFairnessPolicy* policy;
  BandIndex* band;
  const FlowQueueView* flow;
  std::string_view id;           // flow->flowId(), stable while the flow lives
  Program* program = nullptr;    // cached; valid while generation == policy->evictions_
  std::uint64_t generation = 0;  // policy->evictions_ when `program` was looked up
  double service = 0.0;          // its program's scaledService while linked
  TimePoint head_enqueue{};      // its head's enqueue time while linked
  bool linked = false;           // non-empty: in the band's index and the program's list
  FlowEntry* prev = nullptr;     // in program->flows
  FlowEntry* next = nullptr;
  // The band's index is a treap (a search tree by `before`, a max-heap by `prio`, so its depth
  // is O(log F) expected) whose nodes are the entries themselves: linking never allocates. Each
  // node knows the oldest and the youngest head of its subtree.
  std::uint64_t prio;
  FlowEntry* left = nullptr;
  FlowEntry* right = nullptr;
  FlowEntry* oldest = nullptr;    // of the subtree, by olderThan
  FlowEntry* youngest = nullptr;  // of the subtree, by head_enqueue
  FlowEntry* lowest = nullptr;    // of the subtree, by before (its leftmost entry)
};

// A band's non-empty flows (only touched under the policy's mutex).
struct ProgramAwareFairnessPolicy::BandIndex final : FairnessState {
  FlowEntry* root = nullptr;
  std::uint64_t next_prio = 0;  // a counter, mixed into each entry's treap priority

  static void pull(FlowEntry* n) noexcept {
    n->oldest = n->youngest = n;
    n->lowest = n->left != nullptr ? n->left->lowest : n;
    for (FlowEntry* c : {n->left, n->right}) {
      if (c == nullptr) continue;
      if (c->oldest->olderThan(*n->oldest)) n->oldest = c->oldest;
      if (c->youngest->head_enqueue > n->youngest->head_enqueue) n->youngest = c->youngest;
    }
  }
  // Splits `t` into the entries before `k` and the rest.
  static void split(FlowEntry* t, const FlowEntry* k, FlowEntry*& l, FlowEntry*& r) noexcept {
    if (t == nullptr) {
      l = r = nullptr;
    } else if (t->before(*k)) {
      split(t->right, k, t->right, r);
      l = t;
      pull(l);
    } else {
      split(t->left, k, l, t->left);
      r = t;
      pull(r);
    }
  }
  static FlowEntry* merge(FlowEntry* l, FlowEntry* r) noexcept {
    if (l == nullptr) return r;
    if (r == nullptr) return l;
    if (l->prio > r->prio) {
      l->right = merge(l->right, r);
      pull(l);
      return l;
    }
    r->left = merge(l, r->left);
    pull(r);
    return r;
  }
  static FlowEntry* insert(FlowEntry* t, FlowEntry* n) noexcept {
    if (t == nullptr || n->prio > t->prio) {
      split(t, n, n->left, n->right);
      pull(n);
      return n;
    }
    (n->before(*t) ? t->left : t->right) = insert(n->before(*t) ? t->left : t->right, n);
    pull(t);
    return t;
  }
  // Removes `n` (its key unchanged since it was inserted).
  static FlowEntry* erase(FlowEntry* t, FlowEntry* n) noexcept {
    if (t == n) {
      FlowEntry* rest = merge(n->left, n->right);
      n->left = n->right = nullptr;
      return rest;
    }
    (n->before(*t) ? t->left : t->right) = erase(n->before(*t) ? t->left : t->right, n);
    pull(t);
    return t;
  }
  // Recomputes the head summaries on the path to `n` (after its head changed).
  static void touch(FlowEntry* t, FlowEntry* n) noexcept {
    if (t != n) touch(n->before(*t) ? t->left : t->right, n);
    pull(t);
  }
  [[nodiscard]] const FlowEntry* first() const noexcept {
    return root != nullptr ? root->lowest : nullptr;
  }
  [[nodiscard]] const FlowEntry* last() const noexcept {
    const FlowEntry* n = root;
    while (n != nullptr && n->right != nullptr) n = n->right;
    return n;
  }
};

HOLDBACK_INLINE std::unique_ptr<FairnessState> ProgramAwareFairnessPolicy::newState() const {
  return std::make_unique<BandIndex>();
}

HOLDBACK_INLINE std::unique_ptr<FairnessFlowState> ProgramAwareFairnessPolicy::newFlowState(
    const FlowQueueView& flow, FairnessState* bandState) const {
  auto* index = dynamic_cast<BandIndex*>(bandState);
  if (index == nullptr) return nullptr;  // not this policy's band state: pick() degrades
  // The treap priority: a counter through a 64-bit mixer (splitmix64's finalizer).
  std::uint64_t z = (index->next_prio += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return std::make_unique<FlowEntry>(this, index, &flow, z ^ (z >> 31));
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::linkLocked(FlowEntry& e,
                                                            TimePoint headEnqueue) const noexcept {
  Program* p = resolveLocked(e, headEnqueue);
  e.service = p != nullptr ? p->scaledService : 0.0;
  e.head_enqueue = headEnqueue;
  if (p != nullptr) {
    e.prev = nullptr;
    e.next = p->flows;
    if (p->flows != nullptr) p->flows->prev = &e;
    p->flows = &e;
  }
  e.band->root = BandIndex::insert(e.band->root, &e);
  e.linked = true;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::unlinkLocked(FlowEntry& e) const noexcept {
  e.band->root = BandIndex::erase(e.band->root, &e);
  if (e.program != nullptr && (e.prev != nullptr || e.program->flows == &e)) {
    (e.prev != nullptr ? e.prev->next : e.program->flows) = e.next;
    if (e.next != nullptr) e.next->prev = e.prev;
  }
  e.prev = e.next = nullptr;
  e.linked = false;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::rekeyLocked(Program& p) const noexcept {
  for (FlowEntry* e = p.flows; e != nullptr; e = e->next) {
    if (e->service == p.scaledService) continue;
    e->band->root = BandIndex::erase(e->band->root, e);
    e->service = p.scaledService;
    e->band->root = BandIndex::insert(e->band->root, e);
  }
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::headChanged(
    const FlowQueueView& flow, FairnessFlowState& flowState) const noexcept {
  auto& e = static_cast<FlowEntry&>(flowState);  // made by newFlowState
  const QueuedRequestView* head = flow.head();
  MutexLock lock(mu_);
  if (head == nullptr) {
    if (e.linked) unlinkLocked(e);
  } else if (!e.linked) {
    linkLocked(e, head->enqueueTime);
  } else if (head->enqueueTime != e.head_enqueue) {
    e.head_enqueue = head->enqueueTime;
    BandIndex::touch(e.band->root, &e);
  }
}

HOLDBACK_INLINE const FlowQueueView* ProgramAwareFairnessPolicy::pick(
    const BandView& band, FairnessState* state) const noexcept {
  const auto* index = dynamic_cast<const BandIndex*>(state);
  if (index == nullptr) return band.bestHeadFlow();  // no index: degrade to global-strict
  MutexLock lock(mu_);
  return pickLocked(band, *index);
}

// The full scan's argmax without the scan. score(f) = wS x (1 - norm(service_f)) +
// wW x norm(wait_f) is non-increasing in service_f and in head_enqueue_f (wait = now - enqueue;
// every operation of its evaluation rounds monotonically), so:
//   - when one term is the same for every flow (its range is 0 or its weight is 0) the winner is
//     the first flow by the other term (ties: the smaller flow id, as the scan);
//   - otherwise a branch-and-bound walk of the index: a subtree whose lowest service is s_lo and
//     whose oldest head is e_min scores at most score(s_lo, e_min), so it is skipped when that
//     bound is below the best score met (low service and old head go together under LAS, so
//     few subtrees survive); equal scores keep the smaller id. After kMaxPickVisits
//     entries the walk stops with the best met (counted in pickCounts().stoppedAtLimit).
struct ProgramAwareFairnessPolicy::PickWalk {
  double min_service;
  double service_range;
  TimePoint max_enqueue;
  double wait_range;
  double ws;
  double ww;
  const FlowEntry* best = nullptr;
  double best_score = 0.0;
  int visits = 0;
  bool stopped = false;

  [[nodiscard]] double score(double service, TimePoint enqueue) const noexcept {
    const double norm_service = (service - min_service) / service_range;
    const double norm_wait = detail::secondsOf(max_enqueue - enqueue) / wait_range;
    return ws * (1.0 - norm_service) + ww * norm_wait;
  }
  // The best score a flow of subtree `t` can have: its lowest service with its oldest head.
  [[nodiscard]] double bound(const FlowEntry* t) const noexcept {
    return score(t->lowest->service, t->oldest->head_enqueue);
  }
  void consider(const FlowEntry* t) noexcept {
    const double s = score(t->service, t->head_enqueue);
    if (best == nullptr || s > best_score || (s == best_score && t->id < best->id)) {
      best = t;
      best_score = s;
    }
  }
  // In service order (the lower services, the likelier winners, first).
  void walk(const FlowEntry* t) noexcept {
    if (t == nullptr || stopped) return;
    if (best != nullptr && bound(t) < best_score) return;
    walk(t->left);
    if (stopped) return;
    if (++visits > kMaxPickVisits) {
      stopped = true;
      return;
    }
    consider(t);
    walk(t->right);
  }
};

HOLDBACK_INLINE const FlowQueueView* ProgramAwareFairnessPolicy::pickLocked(
    const BandView& band, const BandIndex& index) const noexcept {
  if (index.root == nullptr) return band.bestHeadFlow();  // nothing indexed (band empty)
  ++pick_counts_.picks;
  const FlowEntry* first = index.first();
  const double min_service = first->service;
  const double service_range = index.last()->service - min_service;
  const FlowEntry* oldest = index.root->oldest;
  const TimePoint max_enqueue = index.root->youngest->head_enqueue;
  const double wait_range = detail::secondsOf(max_enqueue - oldest->head_enqueue);
  const double ws = options_.weightService;
  const double ww = options_.weightHeadWait;
  const bool by_service = ws > 0.0 && service_range > 0.0;
  const bool by_wait = ww > 0.0 && wait_range > 0.0;
  if (!by_service && !by_wait) {
    // Every score is equal: the smallest flow id (with equal services, the first by service).
    return service_range > 0.0 ? band.firstActiveFlow() : first->flow;
  }
  if (!by_wait) return first->flow;
  if (!by_service) return oldest->flow;
  PickWalk w{min_service, service_range, max_enqueue, wait_range, ws, ww};
  w.walk(index.root);
  if (w.stopped) ++pick_counts_.stoppedAtLimit;
  return w.best->flow;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
