// Implementation of holdback/flow/plugins/program_aware_fairness.hpp: compiled into libholdback by
// src/flow.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/flow/plugins/program_aware_fairness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Above this exponent the epoch moves forward (2^512 is far from double overflow).
inline constexpr double kProgramRebaseExponent = 512.0;

HOLDBACK_INLINE double secondsOf(Duration d) noexcept {
  return std::chrono::duration<double>(d).count();
}

HOLDBACK_INLINE void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", u);
      out += buffer;
    } else {
      out += c;
    }
  }
  out += '"';
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

HOLDBACK_INLINE ProgramAwareFairnessPolicy::ProgramAwareFairnessPolicy(
    ProgramAwareFairnessOptions options, std::string name)
    : options_(std::move(options)), name_(std::move(name)) {}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::~ProgramAwareFairnessPolicy() = default;

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::validate(const ProgramAwareFairnessOptions& o,
                                                          const std::string& path,
                                                          Diagnostics& diagnostics) {
  if (o.strategy != "las") {
    diagnostics.error(joinPath(path, "strategy"),
                      "\"" + o.strategy + "\" is not a known strategy; allowed: las");
  }
  const auto weight = [&](std::string_view key, double v) {
    if (!std::isfinite(v) || v < 0.0) {
      diagnostics.error(joinPath(path, key), formatNumber(v) + " must be a finite number >= 0");
    }
  };
  weight("lasWeightService", o.weightService);
  weight("lasWeightHeadWait", o.weightHeadWait);
  if (o.halfLife < Duration::zero()) {
    diagnostics.error(joinPath(path, "lasHalfLifeSeconds"),
                      formatDuration(o.halfLife) + " must be >= 0 (0 = no decay)");
  }
  if (o.evictionTtl < Duration::zero()) {
    diagnostics.error(joinPath(path, "evictionTtlSeconds"),
                      formatDuration(o.evictionTtl) + " must be >= 0 (0 = never evict)");
  }
  if (o.evictionSweep <= Duration::zero()) {
    diagnostics.error(joinPath(path, "evictionSweepSeconds"),
                      formatDuration(o.evictionSweep) + " must be > 0");
  }
}

HOLDBACK_INLINE Result<std::unique_ptr<ProgramAwareFairnessPolicy>>
ProgramAwareFairnessPolicy::create(ProgramAwareFairnessOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<ProgramAwareFairnessPolicy>>(std::move(diagnostics), [&] {
    return std::unique_ptr<ProgramAwareFairnessPolicy>(
        new ProgramAwareFairnessPolicy(std::move(options), std::move(name)));
  });
}

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

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::decayExponent(TimePoint t) const noexcept {
  if (options_.halfLife <= Duration::zero()) return 0.0;
  return detail::secondsOf(t - epoch_) / detail::secondsOf(options_.halfLife);
}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::Program* ProgramAwareFairnessPolicy::resolveLocked(
    FlowEntry& e, TimePoint seen) const noexcept {
  if (e.program != nullptr && e.generation == evictions_) return e.program;
  e.program = nullptr;
  e.generation = evictions_;
  if (const auto it = programs_.find(e.id); it != programs_.end()) {
    e.program = &it->second;
  } else {
    // A program queued before it was ever reported: its entry (service 0) is made now, once,
    // so that its reports re-key this flow. Only an allocation failure leaves it out (the flow
    // then stays at service 0 until it is empty again).
    HOLDBACK_TRY {
      Program fresh;
      fresh.lastUpdate = seen;
      e.program = &programs_.emplace(std::string(e.id), fresh).first->second;
    }
    HOLDBACK_CATCH_ALL {
      e.program = nullptr;
    }
  }
  return e.program;
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

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::recordServed(
    std::string_view flowId, std::uint64_t inputTokens, std::uint64_t outputTokens, TimePoint now,
    std::optional<Duration> queueWait) const {
  const double tokens = double(inputTokens) + kOutputTokenWeight * double(outputTokens);
  MutexLock lock(mu_);
  const double exponent = prepareEpochLocked(now);
  // Forget programs not reported for evictionTtl and with nothing queued (at most once per
  // evictionSweep).
  if (options_.evictionTtl > Duration::zero() && now - last_sweep_ >= options_.evictionSweep) {
    last_sweep_ = now;
    bool forgot = false;
    for (auto it = programs_.begin(); it != programs_.end();) {
      if (it->second.flows == nullptr && now - it->second.lastUpdate >= options_.evictionTtl) {
        it = programs_.erase(it);
        forgot = true;
      } else {
        ++it;
      }
    }
    if (forgot) ++evictions_;
  }
  auto it = programs_.find(flowId);
  if (it == programs_.end()) it = programs_.emplace(std::string(flowId), Program{}).first;
  Program& p = it->second;
  p.scaledService += tokens * std::exp2(exponent);
  if (!std::isfinite(p.scaledService)) p.scaledService = 0.0;
  p.lastUpdate = std::max(p.lastUpdate, now);
  rekeyLocked(p);
  ++p.requests;
  if (queueWait && *queueWait >= Duration::zero()) {
    p.waitSeconds += detail::secondsOf(*queueWait);
    ++p.waits;
  }
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::prepareEpochLocked(
    TimePoint now) const noexcept {
  if (!has_epoch_) {
    epoch_ = now;
    last_sweep_ = now;
    has_epoch_ = true;
  }
  const double exponent = decayExponent(now);
  if (exponent <= detail::kProgramRebaseExponent) return exponent;
  // Move the epoch to `now`: every stored value shrinks by the same factor.
  // The indexes are re-keyed as a whole (rescaling in place could merge keys that underflow
  // and break their order): take every indexed flow out, then put it back.
  const double factor = std::exp2(-exponent);
  for (auto& [id, p] : programs_) {
    p.scaledService *= factor;
    for (FlowEntry* e = p.flows; e != nullptr; e = e->next) {
      e->band->root = BandIndex::erase(e->band->root, e);
    }
  }
  for (auto& [id, p] : programs_) {
    for (FlowEntry* e = p.flows; e != nullptr; e = e->next) {
      e->service = p.scaledService;
      e->band->root = BandIndex::insert(e->band->root, e);
    }
  }
  epoch_ = now;
  return 0.0;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::inheritState(const FairnessPolicy& previous,
                                                              TimePoint now) const {
  const auto* prev = dynamic_cast<const ProgramAwareFairnessPolicy*>(&previous);
  if (prev == nullptr || prev == this) return;
  struct Carried {
    std::string id;
    double service = 0.0;  // decayed to `now` under prev's half-life
    TimePoint lastUpdate{};
    std::uint64_t requests = 0;
    double waitSeconds = 0.0;
    std::uint64_t waits = 0;
  };
  std::vector<Carried> carried;
  {
    MutexLock lock(prev->mu_);
    carried.reserve(prev->programs_.size());
    // A clock behind prev's epoch (a host's clock stepped back) decays nothing.
    const double decay =
        prev->has_epoch_ ? std::exp2(-std::max(0.0, prev->decayExponent(now))) : 1.0;
    for (const auto& [id, p] : prev->programs_) {
      double service = p.scaledService * decay;
      if (!std::isfinite(service) || service < 0.0) service = 0.0;
      carried.push_back({id, service, p.lastUpdate, p.requests, p.waitSeconds, p.waits});
    }
  }
  if (carried.empty()) return;
  MutexLock lock(mu_);
  const double exponent = prepareEpochLocked(now);
  const double scale = std::exp2(exponent);  // service at `now` -> scaled to this epoch
  for (Carried& c : carried) {
    auto it = programs_.find(c.id);
    if (it == programs_.end()) it = programs_.emplace(std::move(c.id), Program{}).first;
    Program& p = it->second;
    p.scaledService += c.service * scale;
    if (!std::isfinite(p.scaledService)) p.scaledService = 0.0;
    p.lastUpdate = std::max(p.lastUpdate, c.lastUpdate);
    p.requests += c.requests;
    p.waitSeconds += c.waitSeconds;
    p.waits += c.waits;
    rekeyLocked(p);
  }
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::attainedService(std::string_view flowId,
                                                                   TimePoint now) const {
  MutexLock lock(mu_);
  const auto it = programs_.find(flowId);
  if (it == programs_.end()) return 0.0;
  return it->second.scaledService * std::exp2(-decayExponent(now));
}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::PickCounts ProgramAwareFairnessPolicy::pickCounts()
    const {
  MutexLock lock(mu_);
  return pick_counts_;
}

HOLDBACK_INLINE std::size_t ProgramAwareFairnessPolicy::programCount() const {
  MutexLock lock(mu_);
  return programs_.size();
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::jainLocked() const {
  double sum = 0.0;
  double sum_sq = 0.0;
  std::size_t n = 0;
  for (const auto& [id, p] : programs_) {
    if (p.waits == 0) continue;
    const double mean = p.waitSeconds / double(p.waits);
    sum += mean;
    sum_sq += mean * mean;
    ++n;
  }
  if (n <= 1 || sum_sq <= 0.0) return 1.0;
  return sum * sum / (double(n) * sum_sq);
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::jainFairnessIndex() const {
  MutexLock lock(mu_);
  return jainLocked();
}

HOLDBACK_INLINE std::string ProgramAwareFairnessPolicy::dumpState(TimePoint now) const {
  MutexLock lock(mu_);
  std::string out = "{\"type\": ";
  detail::appendJsonString(out, kType);
  out += ", \"name\": ";
  detail::appendJsonString(out, name_);
  out += ", \"parameters\": {\"strategy\": ";
  detail::appendJsonString(out, options_.strategy);
  out += ", \"lasWeightService\": " + formatNumber(options_.weightService);
  out += ", \"lasWeightHeadWait\": " + formatNumber(options_.weightHeadWait);
  out += ", \"lasHalfLifeSeconds\": " + formatNumber(detail::secondsOf(options_.halfLife));
  out += ", \"evictionTtlSeconds\": " + formatNumber(detail::secondsOf(options_.evictionTtl));
  out += ", \"evictionSweepSeconds\": " + formatNumber(detail::secondsOf(options_.evictionSweep));
  out += "}, \"programs\": [";
  const double decay = std::exp2(-decayExponent(now));
  bool first = true;
  for (const auto& [id, p] : programs_) {
    out += first ? "" : ", ";
    first = false;
    out += "{\"id\": ";
    detail::appendJsonString(out, id);
    out += ", \"attainedService\": " + formatNumber(p.scaledService * decay);
    out += ", \"requests\": " + std::to_string(p.requests);
    out += ", \"meanQueueWaitSeconds\": " +
           (p.waits == 0 ? std::string("null") : formatNumber(p.waitSeconds / double(p.waits)));
    out += ", \"secondsSinceLastReport\": " + formatNumber(detail::secondsOf(now - p.lastUpdate));
    std::size_t queued_flows = 0;
    for (const FlowEntry* e = p.flows; e != nullptr; e = e->next) ++queued_flows;
    out += ", \"nonEmptyFlows\": " + std::to_string(queued_flows);
    out += "}";
  }
  out += "], \"jainFairnessIndex\": " + formatNumber(jainLocked());
  out += ", \"picks\": " + std::to_string(pick_counts_.picks);
  out += ", \"picksStoppedAtLimit\": " + std::to_string(pick_counts_.stoppedAtLimit) + "}";
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
