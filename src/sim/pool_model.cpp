// The pool of model servers (src/sim/engine.hpp): continuous batching with a server-side FCFS
// queue, prefill then one token per decode step, KV accounting, and the periodic scrape that copies
// the servers' queue, running count and KV fraction into the gateway's Endpoint snapshot.
#include "engine.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

Nanos Simulation::tpot(std::size_t running) const {
  return std::max<Nanos>(
      1, fromMs(s_.pool.tpotBaseMs + s_.pool.tpotPerRunningMs * static_cast<double>(running)));
}

void Simulation::admit(std::size_t e) {
  Server& sv = servers_[e];
  const bool tokens = s_.pool.service == ServiceModel::kTokens;
  while (!sv.queue.empty() && sv.running.size() < static_cast<std::size_t>(s_.pool.slots)) {
    Request& r = requests_[sv.queue.front()];
    if (tokens && !sv.running.empty() && sv.kvTokens + r.input > s_.pool.kvCapacityTokens) break;
    const std::size_t id = sv.queue.front();
    sv.queue.pop_front();
    r.state = State::kRunning;
    r.admitted = now_;
    sv.running.push_back(id);
    if (tokens) {
      sv.kvTokens += r.input;
      r.firstToken = now_ + fromMs(s_.pool.prefillBaseMs +
                                   s_.pool.prefillPerTokenMs * static_cast<double>(r.input));
      r.generated = 1;
    } else {
      r.firstToken = now_;
      const double ms = rngs_[r.cls].exponential(s_.pool.meanServiceMs);
      schedule(now_ + std::max<Nanos>(1, fromMs(ms)), EventType::kComplete, id);
    }
  }
  if (tokens && !sv.running.empty() && !sv.stepScheduled) {
    sv.stepScheduled = true;
    schedule(now_ + tpot(sv.running.size()), EventType::kStep, e);
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
    if (r.firstToken <= now_ && r.generated < r.output) {
      ++r.generated;
      ++sv.kvTokens;
    }
    if (r.firstToken <= now_ && r.generated >= r.output) {
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
  Server& sv = servers_[static_cast<std::size_t>(requests_[id].endpoint)];
  sv.running.erase(std::find(sv.running.begin(), sv.running.end(), id));
  complete(id);
  admit(static_cast<std::size_t>(requests_[id].endpoint));
}

void Simulation::complete(std::size_t id) {
  Request& r = requests_[id];
  const auto e = static_cast<std::size_t>(r.endpoint);
  r.state = State::kDone;
  r.finished = now_;
  if (s_.pool.service == ServiceModel::kTokens) servers_[e].kvTokens -= r.input + r.generated - 1;
  Gateway& gw = gateways_[r.gateway];
  // The request's slot is free: end its lease (feeds the demand a reservation policy reads).
  if (gw.fc && r.leaseId != 0) (void)gw.fc->release(r.leaseId, at(now_));
  if (gw.ledger) {
    // pool.lostCompletions: the fault of a host that forgets to report some completions.
    const bool lost = s_.pool.lostCompletions > 0.0 && lossRng_.uniform() < s_.pool.lostCompletions;
    if (!lost) (void)gw.ledger->recordCompletion(gw.ids[e], r.input + r.output);
    gw.fill();
  } else {
    inFlight_[id].release();
    gw.inFlight->fill(gw.source->pool());
  }
  replace(id);
}

// Every replica reads the same scraped telemetry (its in-flight counts stay its own).
void Simulation::scrape() {
  if (now_ <= end_) dispatchesPerScrape_.push_back(static_cast<double>(dispatchesSinceScrape_));
  dispatchesSinceScrape_ = 0;
  for (Gateway& gw : gateways_) {
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
                                              static_cast<double>(s_.pool.kvCapacityTokens))};
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
          1.0, static_cast<double>(sv.kvTokens) / static_cast<double>(s_.pool.kvCapacityTokens));
    }
  }
}
}  // namespace detail
}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
