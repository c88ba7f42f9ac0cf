// The simulator-only arm `oracle` (Arm::oracle; docs/simulation.md, "The oracle arm"): one gateway
// that sees the true pool and knows the future arrivals of the top-priority classes (the
// simulator draws them ahead from the same streams and trace cursors the run uses, so they are
// the arrivals the run will see).
//
//   A top-priority request is routed at once to an endpoint where it starts now (most free slots,
//   then most free KV), else to the one where it is expected to start first (oracleSoonest).
//   The other classes wait in the gateway, highest priority first, FIFO within a class. The head
//   is dispatched, to an endpoint where it starts at once, when the forecast allows it: from now to
//   the end of its expected service, every foreseen top-priority arrival still finds an endpoint
//   where it would start (oracleAdmits), next to the requests running or queued on the servers
//   (until their expected ends), the head itself and the foreseen arrivals placed before it (each
//   from its arrival for its expected service); a request holds a slot and its input + output KV
//   tokens. Expected service: prefill(input) + (output - 1) x the decode step of a full batch (the
//   slowest endpoint's for a foreseen arrival; meanServiceMs with exponential service). A waiting
//   request leaves at its class's TTL (the controller's default when it sets none). No eviction.
#include "sim/engine.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

Nanos Simulation::oracleService(std::int64_t input, std::int64_t output,
                                const EndpointGroup& g) const {
  if (s_.pool.service != ServiceModel::kTokens) return fromMs(s_.pool.meanServiceMs);
  const double steps = static_cast<double>(std::max<std::int64_t>(0, output - 1));
  const auto slots = static_cast<std::size_t>(std::max(1, g.slots));
  return fromMs(g.timing.prefillMs(input) + steps * g.timing.tpotMs(slots));
}

// The time `r` (running or queued on `sv`) is expected to hold its slot from now.
Nanos Simulation::oracleRemaining(const Request& r, const Server& sv) const {
  if (s_.pool.service != ServiceModel::kTokens || r.state != State::kRunning) {
    return oracleService(r.input, r.output, sv.spec);
  }
  const auto slots = static_cast<std::size_t>(std::max(1, sv.spec.slots));
  const Nanos step = std::max<Nanos>(1, fromMs(sv.spec.timing.tpotMs(slots)));
  const Nanos prefill = std::max<Nanos>(0, r.ready - now_);  // its prefill or recompute
  return prefill + std::max<std::int64_t>(1, r.output - r.generated) * step;
}

void Simulation::oracleSetup() {
  oracleTop_ = s_.classes.empty() ? 0 : s_.classes.front().priority;
  for (const TrafficClass& c : s_.classes) oracleTop_ = std::max(oracleTop_, c.priority);
  oracleQueues_.assign(s_.classes.size(), {});
  for (std::size_t c = 0; c < s_.classes.size(); ++c) {
    if (s_.classes[c].priority != oracleTop_) oracleOrder_.push_back(c);
  }
  std::stable_sort(oracleOrder_.begin(), oracleOrder_.end(), [&](std::size_t a, std::size_t b) {
    return s_.classes[a].priority > s_.classes[b].priority;
  });
  // A foreseen arrival's service on the slowest endpoint; 0 when no endpoint can hold it.
  auto foresee = [&](Nanos t, std::int64_t input, std::int64_t output) {
    Nanos service = 0;
    if (input + output <= largestKv_) {
      for (const Server& sv : servers_) {
        service = std::max(service, oracleService(input, output, sv.spec));
      }
    }
    oracleFuture_.push_back({.time = t, .input = input, .output = output, .service = service});
  };
  for (std::size_t c = 0; c < s_.classes.size(); ++c) {
    const TrafficClass& tc = s_.classes[c];
    if (tc.priority != oracleTop_) continue;
    if (options_.onlyClass >= 0 && c != static_cast<std::size_t>(options_.onlyClass)) continue;
    const ArrivalSpec& a = tc.arrival;
    if (a.process == ArrivalProcess::kTrace) {  // the cursor run() makes, read ahead
      if (!a.trace) continue;
      TraceCursor ahead(a.trace, traceStartNs(*a.trace, a.startSeconds, s_.seed), a.timeScale);
      for (; ahead.time() < end_; ahead.advance())
        foresee(ahead.time(), ahead.input(), ahead.output());
    } else if (a.process != ArrivalProcess::kBacklog) {
      // The class's stream, drawn as run() and arrive() draw it: the first gap, then per arrival
      // the next gap, the input and the output. (With exponential service admissions draw from
      // the same stream, so there the foresight is approximate.)
      Random ahead = rngs_[c];
      std::optional<Nanos> t = nextArrival(a, ahead, 0, end_);
      while (t) {
        const std::optional<Nanos> next = nextArrival(a, ahead, *t, end_);
        const std::int64_t input = sampleLength(tc.inputTokens, ahead);
        foresee(*t, input, sampleLength(tc.outputTokens, ahead));
        t = next;
      }
    }  // a closed-loop top class cannot be foreseen: nothing is held for it
  }
  std::stable_sort(oracleFuture_.begin(), oracleFuture_.end(),
                   [](const OracleArrival& a, const OracleArrival& b) { return a.time < b.time; });
}

// An endpoint where `r` starts now (no queue ahead, a free slot, KV for its input): the one with
// the most free slots, then the most free KV.
std::optional<std::size_t> Simulation::oracleEndpointFor(const Request& r) const {
  const bool tokens = s_.pool.service == ServiceModel::kTokens;
  std::optional<std::size_t> best;
  auto room = [&](std::size_t e) {
    const Server& sv = servers_[e];
    return std::pair(sv.spec.slots - static_cast<std::int64_t>(sv.running.size()),
                     sv.spec.kvCapacityTokens - sv.kvTokens);
  };
  for (std::size_t e = 0; e < servers_.size(); ++e) {
    const Server& sv = servers_[e];
    if (!sv.queue.empty()) continue;
    if (tokens ? !admitsHead(sv.running.size(), sv.spec.slots, sv.kvTokens, r.input,
                             sv.spec.kvCapacityTokens)
               : sv.running.size() >= static_cast<std::size_t>(sv.spec.slots)) {
      continue;
    }
    if (!best || room(e) > room(*best)) best = e;
  }
  return best;
}

// The endpoint where a request queued now is expected to start first: per endpoint, each slot
// frees at its running request's expected end, and the requests queued ahead take the slots in
// order as they free (each for its expected service); the next free slot after them.
std::size_t Simulation::oracleSoonest() {
  std::size_t best = 0;
  Nanos soonest = 0;
  for (std::size_t k = 0; k < servers_.size(); ++k) {
    const Server& sv = servers_[k];
    oracleStarts_.assign(static_cast<std::size_t>(std::max(1, sv.spec.slots)), 0);  // free now
    for (std::size_t i = 0; i < sv.running.size() && i < oracleStarts_.size(); ++i) {
      oracleStarts_[i] = oracleRemaining(requests_[sv.running[i]], sv);
    }
    std::make_heap(oracleStarts_.begin(), oracleStarts_.end(), std::greater<>());
    for (const std::size_t id : sv.queue) {
      std::pop_heap(oracleStarts_.begin(), oracleStarts_.end(), std::greater<>());
      const Request& q = requests_[id];
      oracleStarts_.back() += oracleService(q.input, q.output, sv.spec);
      std::push_heap(oracleStarts_.begin(), oracleStarts_.end(), std::greater<>());
    }
    if (k == 0 || oracleStarts_.front() < soonest) {
      best = k;
      soonest = oracleStarts_.front();
    }
  }
  return best;
}

void Simulation::oracleSubmit(std::size_t id) {
  const Request& r = requests_[id];
  const bool top = s_.classes[r.cls].priority == oracleTop_;
  if (top) ++oracleArrived_;  // one more of the foreseen arrivals has come (too large ones too)
  if (r.input + r.output > largestKv_) return route(id);  // refused as too large at once
  if (top) {
    std::optional<std::size_t> e = oracleEndpointFor(r);
    if (!e) e = oracleSoonest();  // every endpoint busy
    requests_[id].dispatched = now_;
    return sendTo(id, *e);
  }
  oracleQueues_[r.cls].push_back(id);
  oracleCycle();
}

// Whether dispatching `r` to endpoint `e` now keeps, by the forecast, room for every foreseen
// top-priority arrival until `r` is expected to finish: the arrivals are placed in time order, each
// where it would start (no queue ahead, a free slot and KV for its input next to what the endpoint
// holds, most free slots first), every request holding a slot and its input + output tokens until
// its expected end; a request queued on a server starts there as the ones ahead of it end.
bool Simulation::oracleAdmits(const Request& r, std::size_t e) {
  const bool tokens = s_.pool.service == ServiceModel::kTokens;
  const Nanos until = now_ + oracleService(r.input, r.output, servers_[e].spec);
  oracleSlots_.assign(servers_.size(), 0);
  oracleKv_.assign(servers_.size(), 0);
  oracleEnds_.clear();
  auto hold = [&](std::size_t k, Nanos end, std::int64_t kv) {
    ++oracleSlots_[k];
    oracleKv_[k] += kv;
    if (end >= until) return;
    oracleEnds_.push_back({.time = end, .endpoint = k, .kv = kv});
    std::push_heap(oracleEnds_.begin(), oracleEnds_.end(), std::greater<>());
  };
  for (std::size_t k = 0; k < servers_.size(); ++k) {
    const Server& sv = servers_[k];
    for (const std::size_t id : sv.running) {
      const Request& o = requests_[id];
      hold(k, now_ + oracleRemaining(o, sv), o.input + o.output);
    }
  }
  // A request queued on a server starts there, in order, as the requests ahead of it end.
  oracleQueued_.assign(servers_.size(), 0);
  auto end = [&] {
    std::pop_heap(oracleEnds_.begin(), oracleEnds_.end(), std::greater<>());
    const OracleEnd done = oracleEnds_.back();
    oracleEnds_.pop_back();
    --oracleSlots_[done.endpoint];
    oracleKv_[done.endpoint] -= done.kv;
    const Server& sv = servers_[done.endpoint];
    if (oracleQueued_[done.endpoint] < sv.queue.size()) {
      const Request& o = requests_[sv.queue[oracleQueued_[done.endpoint]++]];
      hold(done.endpoint, done.time + oracleService(o.input, o.output, sv.spec),
           o.input + o.output);
    }
  };
  hold(e, until, r.input + r.output);
  for (std::size_t i = oracleArrived_; i < oracleFuture_.size(); ++i) {
    const OracleArrival& a = oracleFuture_[i];
    if (a.time >= until) break;
    if (a.service == 0) continue;
    while (!oracleEnds_.empty() && oracleEnds_.front().time <= a.time) end();
    std::optional<std::size_t> best;
    auto room = [&](std::size_t k) {
      return std::pair(servers_[k].spec.slots - oracleSlots_[k],
                       servers_[k].spec.kvCapacityTokens - oracleKv_[k]);
    };
    for (std::size_t k = 0; k < servers_.size(); ++k) {
      const bool fits = oracleQueued_[k] == servers_[k].queue.size() &&  // none ahead of it
                        oracleSlots_[k] < servers_[k].spec.slots &&
                        (!tokens || oracleSlots_[k] == 0 ||
                         oracleKv_[k] + a.input <= servers_[k].spec.kvCapacityTokens);
      if (fits && (!best || room(k) > room(*best))) best = k;
    }
    if (!best) return false;
    hold(*best, a.time + a.service, a.input + a.output);
  }
  return true;
}

// Dispatches the waiting lower classes' heads while the forecast allows (each tick, each
// arrival); a request waiting past its class's TTL (the controller's default, 60 s, when the class
// sets none) leaves the queue evicted, as the controller's would.
void Simulation::oracleCycle() {
  ++cycles_;
  bool work = false;
  while (true) {
    std::size_t pick = oracleQueues_.size();
    for (const std::size_t c : oracleOrder_) {
      std::deque<std::size_t>& q = oracleQueues_[c];
      const double seconds = s_.classes[c].ttlSeconds;
      const Nanos ttl = seconds > 0.0 ? fromSeconds(seconds)
                                      : std::chrono::nanoseconds(kDefaultRequestTtl).count();
      while (!q.empty() && now_ - requests_[q.front()].arrival >= ttl) {
        Request& gone = requests_[q.front()];
        gone.state = State::kEvicted;
        gone.finished = now_;
        const std::size_t id = q.front();
        q.pop_front();
        replace(id);
      }
      if (q.empty()) continue;
      const bool first = pick == oracleQueues_.size();
      if (first ||
          (s_.classes[c].priority == s_.classes[pick].priority &&
           requests_[q.front()].arrival < requests_[oracleQueues_[pick].front()].arrival)) {
        pick = c;
      }
    }
    if (pick == oracleQueues_.size()) break;
    work = true;
    const std::size_t id = oracleQueues_[pick].front();
    const std::optional<std::size_t> e = oracleEndpointFor(requests_[id]);
    if (!e || !oracleAdmits(requests_[id], *e)) {
      ++gatedCycles_;
      break;
    }
    oracleQueues_[pick].pop_front();
    requests_[id].dispatched = now_;
    sendTo(id, *e);
  }
  if (work) ++cyclesWithWork_;
}

}  // namespace detail
}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
