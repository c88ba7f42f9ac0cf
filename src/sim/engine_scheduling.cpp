// The model servers' own scheduling (pool.engineScheduling, src/sim/scenario.hpp): where a request
// joins its server's queue, how it starts, and priority preemption.
//
//   fcfs              the queue is FIFO; the head starts when a slot is free and its input fits
//                     the KV cache (pool_timing.hpp, admitsHead).
//   priority          the queue is ordered by priority, highest first, then by the time the request
//                     reached the server (vLLM's (priority, arrival_time) order); the head starts
//                     as with fcfs. Nothing running is preempted for a waiting request: vLLM V1's
//                     --scheduling-policy priority (vllm/v1/core/sched/scheduler.py, whose waiting
//                     loop stops at max_num_seqs or when the KV blocks do not fit;
//                     vllm-project/vllm issue 40004).
//   priority-preempt  the same order, and while the head does not start (no free slot, or its
//                     tokens do not fit the KV cache) and a running request has a strictly lower
//                     priority, the running request of the lowest priority, most recently arrived
//                     on the server, is preempted (vLLM V0's _schedule_priority_preemption,
//                     vllm/core/scheduler.py, recompute mode; V0 compares (priority, arrival) and
//                     so also preempts a later arrival of the same priority, which this model does
//                     not, as the V1 proposals for it do not (vllm-project/vllm pull 54530)).
//
// A preempted request loses its KV and goes back to the queue in its place (its arrival on the
// server is kept); the client loses nothing. When it starts again it holds the KV of its prompt
// and the tokens it generated and spends prefill(those tokens) recomputing them before it decodes
// on (a request preempted before its first token starts over). Those tokens are counted as
// recomputed (Request::recomputedTokens).
#include <algorithm>

#include "sim/engine.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

void Simulation::enqueueOnServer(std::size_t e, std::size_t id) {
  Server& sv = servers_[e];
  Request& r = requests_[id];
  if (r.serverArrival < 0) r.serverArrival = now_;  // a preempted request keeps its place
  if (engine_ == EngineScheduling::kFcfs) {
    sv.queue.push_back(id);
    return;
  }
  // Served first: the higher priority, then the earlier arrival on the server, then the lower id.
  auto before = [&](std::size_t a, std::size_t b) {
    const Request& x = requests_[a];
    const Request& y = requests_[b];
    if (priorityOf(x) != priorityOf(y)) return priorityOf(x) > priorityOf(y);
    if (x.serverArrival != y.serverArrival) return x.serverArrival < y.serverArrival;
    return a < b;
  };
  sv.queue.insert(std::upper_bound(sv.queue.begin(), sv.queue.end(), id, before), id);
}

std::int64_t Simulation::startTokens(const Request& r) const {
  // A preempted request past its first token recomputes its prompt and the tokens it generated
  // (the first is counted in `generated` from its start on, its KV from the next step).
  return r.firstToken >= 0 ? r.input + r.generated - 1 : r.input;
}

void Simulation::start(std::size_t e, std::size_t id) {
  Server& sv = servers_[e];
  Request& r = requests_[id];
  const bool tokens = s_.pool.service == ServiceModel::kTokens;
  r.state = State::kRunning;
  if (r.admitted < 0) {
    r.admitted = now_;
    // It no longer waits on its server (restoration where a protected request waits).
    if (arm_.eviction && arm_.flowControl && gateways_[r.gateway].fc) {
      (void)gateways_[r.gateway].fc->ticket(r.leaseId).markStarted();
    }
  }
  sv.running.push_back(id);
  if (!tokens) {
    r.firstToken = now_;
    r.ready = now_;
    const double ms = rngs_[r.cls].exponential(s_.pool.meanServiceMs);
    schedule(now_ + std::max<Nanos>(1, fromMs(ms)), EventType::kComplete, id);
    return;
  }
  const std::int64_t held = startTokens(r);
  sv.kvTokens += held;
  if (r.preempted) {
    r.recomputedTokens += held;
    recomputedTokens_ += static_cast<std::uint64_t>(held);
  }
  r.preempted = false;
  r.ready = now_ + fromMs(sv.spec.timing.prefillMs(held));
  if (r.firstToken < 0) {  // fresh (or preempted before its first token): the first token
    r.firstToken = r.ready;
    r.generated = 1;
  }
}

void Simulation::preemptFor(std::size_t e) {
  Server& sv = servers_[e];
  if (sv.queue.empty()) return;
  const Request& head = requests_[sv.queue.front()];
  const Priority p = priorityOf(head);
  const std::int64_t need = startTokens(head);
  while (
      !admitsHead(sv.running.size(), sv.spec.slots, sv.kvTokens, need, sv.spec.kvCapacityTokens)) {
    // The victim: the lowest priority below the head's, then the latest arrival on the server.
    std::size_t victim = requests_.size();
    for (const std::size_t id : sv.running) {
      const Request& r = requests_[id];
      if (priorityOf(r) >= p) continue;
      if (victim == requests_.size()) {
        victim = id;
        continue;
      }
      const Request& v = requests_[victim];
      if (priorityOf(r) != priorityOf(v)       ? priorityOf(r) < priorityOf(v)
          : r.serverArrival != v.serverArrival ? r.serverArrival > v.serverArrival
                                               : id > victim) {
        victim = id;
      }
    }
    if (victim == requests_.size()) return;  // nothing below it runs: it waits
    preempt(e, victim);
  }
}

void Simulation::preempt(std::size_t e, std::size_t id) {
  Server& sv = servers_[e];
  Request& r = requests_[id];
  sv.running.erase(std::find(sv.running.begin(), sv.running.end(), id));
  sv.kvTokens -= r.input + r.generated - 1;  // the KV it held (releaseSlot's count)
  if (r.firstToken > now_) {  // still in its first prefill: no token yet, it starts over
    r.firstToken = -1;
    r.generated = 0;
  }
  r.state = State::kServerQueue;
  r.preempted = true;
  ++r.preemptions;
  ++preemptions_;
  enqueueOnServer(e, id);
}

DispatchLedgerOptions priorityLevelsOf(const Scenario& s, const Arm& arm) {
  DispatchLedgerOptions o;
  if (!arm.priorityRouting) return o;
  for (const TrafficClass& c : s.classes) o.priorityLevels.push_back(c.priority);
  return o;  // the ledger sorts them and drops duplicates
}

std::span<const std::int64_t> Simulation::priorityCounts(std::size_t id) {
  if (!arm_.priorityRouting) return {};
  Gateway& gw = gateways_[requests_[id].gateway];
  std::vector<Endpoint>& pool = gw.source->pool();
  gw.above.resize(pool.size());
  const Priority p = priorityOf(requests_[id]);
  if (gw.ledger) {
    gw.ledger->inFlightAtOrAbove(gw.ids, p, gw.above);
  } else {
    gw.inFlight->inFlightAtOrAbove(pool, p, gw.above);
  }
  return gw.above;
}

}  // namespace detail
}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
