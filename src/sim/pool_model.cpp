// The pool of model servers (src/sim/engine.hpp): continuous batching with a server-side queue
// (FCFS, or by priority: engine_scheduling.cpp), prefill then one token per decode step, KV
// accounting, and the periodic scrape that copies the servers' queue, running count and KV
// fraction into the gateway's Endpoint snapshot.
#include "sim/engine.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

Nanos Simulation::tpot(const Server& sv) const {
  return std::max<Nanos>(1, fromMs(sv.spec.timing.tpotMs(sv.running.size())));
}

void Simulation::admit(std::size_t e) {
  Server& sv = servers_[e];
  const bool tokens = s_.pool.service == ServiceModel::kTokens;
  const bool preempting = engine_ == EngineScheduling::kPriorityPreempt;
  while (!sv.queue.empty()) {
    if (preempting) preemptFor(e);  // room for the head, from lower priorities
    if (sv.running.size() >= static_cast<std::size_t>(sv.spec.slots)) break;
    const Request& r = requests_[sv.queue.front()];
    if (tokens && !admitsHead(sv.running.size(), sv.spec.slots, sv.kvTokens, startTokens(r),
                              sv.spec.kvCapacityTokens)) {
      break;
    }
    const std::size_t id = sv.queue.front();
    sv.queue.pop_front();
    start(e, id);
  }
  if (tokens && !sv.running.empty() && !sv.stepScheduled) {
    sv.stepScheduled = true;
    schedule(now_ + tpot(sv), EventType::kStep, e);
  }
}

// One decode step of a continuous batch: every request past its prefill gets one token.
void Simulation::step(std::size_t e) {
  Server& sv = servers_[e];
  sv.stepScheduled = false;
  std::size_t kept = 0;
  for (std::size_t k = 0; k < sv.running.size(); ++k) {
    const std::size_t id = sv.running[k];
    Request& r = requests_[id];
    if (r.ready <= now_ && r.generated < r.output) {
      ++r.generated;
      ++sv.kvTokens;
    }
    if (r.ready <= now_ && r.generated >= r.output) {
      complete(id);
    } else {
      sv.running[kept++] = id;
    }
  }
  sv.running.resize(kept);
  admit(e);
}

// Exponential service.
void Simulation::finish(std::size_t id) {
  if (requests_[id].state != State::kRunning) return;  // aborted by a revocation meanwhile
  Server& sv = servers_[static_cast<std::size_t>(requests_[id].endpoint)];
  sv.running.erase(std::find(sv.running.begin(), sv.running.end(), id));
  complete(id);
  admit(static_cast<std::size_t>(requests_[id].endpoint));
}

void Simulation::complete(std::size_t id) {
  Request& r = requests_[id];
  r.state = State::kDone;
  r.finished = now_;
  const TrafficClass& tc = s_.classes[r.cls];
  if (!tc.declaresOutput && gateways_[r.gateway].outputs) {
    gateways_[r.gateway].outputs->record(tc.priority, static_cast<double>(r.output));
  }
  releaseSlot(id, true);
  replace(id);
}

// The request left its server (completed or aborted): its KV is free, its lease ends (the
// controller's release; for a revoked lease the confirmation) and the gateway's counts drop.
void Simulation::releaseSlot(std::size_t id, bool running) {
  Request& r = requests_[id];
  const auto e = static_cast<std::size_t>(r.endpoint);
  if (running && s_.pool.service == ServiceModel::kTokens) {
    servers_[e].kvTokens -= r.input + r.generated - 1;
  }
  Gateway& gw = gateways_[r.gateway];
  if (table_) reserveRelease(id);  // reserve mode: its booking goes
  // The request's slot is free: end its lease (feeds the demand a reservation policy reads).
  if (gw.fc && r.leaseId != 0) {
    gw.leases.erase(r.leaseId);
    (void)gw.fc->release(r.leaseId, at(now_));
  }
  if (gw.ledger) {
    // pool.lostCompletions: the fault of a host that forgets to report some completions.
    const bool lost = s_.pool.lostCompletions > 0.0 && lossRng_.uniform() < s_.pool.lostCompletions;
    if (!lost) (void)gw.ledger->recordCompletion(gw.ids[e], r.input + r.output, priorityOf(r));
    if (!lost && gw.reserve) gw.reserve->ended(e, r.input + r.output);
    gw.fill();
    if (!lost && feedOn_) {
      feed({.kind = FeedEvent::Kind::kCompletion,
            .gateway = r.gateway,
            .endpoint = static_cast<std::uint32_t>(e),
            .tokens = r.input + r.output});
    }
  } else {
    inFlight_[id].release();
    gw.inFlight->fill(gw.source->pool());
  }
}

// A revocation's abort reaches the server: the request leaves its queue or its batch (the output
// it generated is lost), its slot goes to the next queued request, and its client sends it again
// (same lengths; the retry pays its prefill again). A request that ended meanwhile is left alone.
void Simulation::abort(std::size_t id) {
  Request& r = requests_[id];
  if (r.state != State::kServerQueue && r.state != State::kRunning) return;
  const auto e = static_cast<std::size_t>(r.endpoint);
  Server& sv = servers_[e];
  const bool running = r.state == State::kRunning;
  if (running) {
    sv.running.erase(std::find(sv.running.begin(), sv.running.end(), id));
    if (r.firstToken > now_) r.firstToken = -1;  // still in prefill: no token yet
  } else {
    sv.queue.erase(std::find(sv.queue.begin(), sv.queue.end(), id));
  }
  r.state = State::kRevoked;
  r.finished = now_;
  ++aborted_;
  const std::int64_t wasted = r.firstToken >= 0 ? r.generated : 0;
  wastedTokens_ += static_cast<std::uint64_t>(wasted);
  // Its retry pays its prefill again (running, or preempted back to the queue after it ran).
  if (r.admitted >= 0) repaidPrefillTokens_ += static_cast<std::uint64_t>(r.input);
  releaseSlot(id, running);
  const Request retry = retryOf(r, id, now_);
  admit(e);
  submit(retry);  // may grow requests_: no reference into it from here on
}

// Every replica reads the same scraped telemetry (its in-flight counts stay its own); with the
// replica feed each replica scrapes on its own timer (`which`: replica which - 1 alone).
void Simulation::scrape(std::size_t which) {
  if (which <= 1) {  // the dispatches per scrape: replica 0's scrape interval
    if (now_ <= end_) dispatchesPerScrape_.push_back(static_cast<double>(dispatchesSinceScrape_));
    dispatchesSinceScrape_ = 0;
  }
  for (std::size_t g = 0; g < gateways_.size(); ++g) {
    if (which != 0 && g + 1 != which) continue;
    if (table_) reserveScraped(g);  // reserve mode: the room this replica sends the table
    Gateway& gw = gateways_[g];
    std::vector<Endpoint>& pool = gw.source->pool();
    if (gw.ledger) {
      // The server samples its metrics now; the replica's ledger baseline is its counters now.
      for (std::size_t i = 0; i < pool.size(); ++i) {
        const Server& sv = servers_[i];
        const Scrape scrape{
            .updateTime = at(now_),
            .waitingQueueSize = static_cast<double>(sv.queue.size()),
            .runningRequests = static_cast<double>(sv.running.size()),
            .kvCacheUsage = std::min(1.0, static_cast<double>(sv.kvTokens) /
                                              static_cast<double>(sv.spec.kvCapacityTokens))};
        (void)gw.ledger->installScrape(gw.ids[i], scrape, gw.ledger->mark(gw.ids[i]));
      }
      gw.fill();
      continue;
    }
    for (std::size_t i = 0; i < pool.size(); ++i) {
      const Server& sv = servers_[i];
      pool[i].updateTime = at(now_);
      pool[i].waitingQueueSize = static_cast<double>(sv.queue.size());
      pool[i].runningRequests = static_cast<double>(sv.running.size());
      pool[i].kvCacheUsage = std::min(
          1.0, static_cast<double>(sv.kvTokens) / static_cast<double>(sv.spec.kvCapacityTokens));
      // The capacity a deployment configures (the ledger's registration carries it otherwise).
      pool[i].maxRunningRequests = sv.spec.slots;
      pool[i].kvCapacityTokens = sv.spec.kvCapacityTokens;
    }
  }
}
}  // namespace detail
}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
