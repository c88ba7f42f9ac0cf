// The replicas' coordination in the simulation (src/sim/engine.hpp): the replica feed (share
// mode's events between replicas) and reserve mode, where every dispatch books its footprint in
// a reservation table the replicas share before it starts (pool.replicaMode: reserve; the
// protocol: docs/design/replicas.md).
//
// Reserve mode, as simulated:
//   - the controller's dispatch parks the request at its replica (ReserveReplica::park: priority
//     desc, enqueue time asc) and the replica calls the table for the head of its list, one call
//     at a time: the call carries the request's footprint (input + output tokens, as the ledger
//     counts it), the replica's latest scrape of every endpoint and the endpoints in its order
//     of preference (the picker's choice first, then the others by the replica's view of their
//     requests); the table books the first that fits (reservationFits);
//   - the call reaches the table half a round trip after it was sent and its reply the replica
//     half a round trip later: a booked request goes to its server then (one round trip after
//     its dispatch at the least), a refused one stays parked;
//   - the replica calls again for its head on the table's notice of a release (half a round
//     trip after the release reached the table, itself half a round trip after the request left
//     its server), on a new dispatch, and every pool.replicaReserveRetryMs;
//   - bookings carry a lease of three sync intervals, renewed and expired at every sync (no
//     replica dies in the simulation: the lease never ends a live booking);
//   - a parked request the controller revokes is cancelled at once (it holds no server);
//   - a booking for a class below the top one must also leave free over the pool the room its
//     band's ceiling keeps at the calling replica, at least the policy's fixed reserve
//     (minReserve, rounded up; leavesPoolReserve, bookingKeep): without the term, replicas that
//     each see the reserve free spend it together, and with the fixed reserve alone the
//     requests parked below the top band took the pool down to it wherever the band's ceiling
//     kept more (the gateway's script keeps the fixed reserve alone);
//   - the replica's view: its ledger's (its own dispatches and the feed's, the requests that
//     ended since its scrape credited at once) plus its parked requests waiting at the endpoint
//     the picker chose for them (ReserveReplica::overlay); the room a call carries is its scrape
//     less the same ended requests, slots and KV (ReserveReplica::roomToSend: the table books a
//     freed slot once however many replicas see it free). Every replica's gate sees a freed slot
//     at once, so the replicas' controllers all dispatch into it: the table books one, the band
//     term above keeps the others parked, and a parked request is no eviction victim
//     (Ticket::setParked: revoking it frees nothing).
#include <cmath>
#include <numeric>

#include "sim/engine.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

void Simulation::feed(const FeedEvent& e) {
  const std::size_t index = feedEvents_.size();
  feedEvents_.push_back(e);
  schedule(now_ + fromMs(s_.pool.replicaFeedDelayMs), EventType::kFeed, index);
}

// What the host's feed does on every other replica: the ledger counts the dispatch or completion,
// the controller the arrival.
void Simulation::deliver(const FeedEvent& e) {
  for (std::size_t h = 0; h < gateways_.size(); ++h) {
    if (h == e.gateway) continue;
    Gateway& gw = gateways_[h];
    switch (e.kind) {
      case FeedEvent::Kind::kDispatch:
        (void)gw.ledger->recordPeerDispatch(gw.ids[e.endpoint], e.tokens);
        gw.fill();
        break;
      case FeedEvent::Kind::kCompletion:
        if (gw.reserve) gw.reserve->ended(e.endpoint, e.tokens);
        (void)gw.ledger->recordPeerCompletion(gw.ids[e.endpoint], e.tokens);
        gw.fill();
        break;
      case FeedEvent::Kind::kArrival:
        if (gw.fc) gw.fc->replicaPort().recordPeerArrival(e.priority, e.tokens);
        break;
    }
  }
}

void Simulation::reserveSetup() {
  if (s_.pool.replicaMode != ReplicaMode::kReserve || arm_.oracle) return;  // oracle: one view
  const std::size_t n = servers_.size();
  table_ = std::make_unique<ReservationTable>(n);
  reserveTop_ = s_.classes.empty() ? Priority{0} : s_.classes.front().priority;
  for (const TrafficClass& c : s_.classes) reserveTop_ = std::max(reserveTop_, c.priority);
  reserveKeep_ = static_cast<std::int64_t>(std::ceil(policyMinReserve(s_, arm_)));
  for (Gateway& gw : gateways_) {
    gw.reserve = std::make_unique<ReserveReplica>(n);
    for (std::size_t i = 0; i < n; ++i) {  // capacity known, idle until the first scrape
      gw.reserve->scraped[i] = ReservationRoom{
          .slots = servers_[i].spec.slots, .kvCapacityTokens = servers_[i].spec.kvCapacityTokens};
    }
  }
}

// The band's last ceiling at the replica (FlowControllerStats: it allocates, once per call for a
// class below the top one).
std::int64_t Simulation::reserveBandKeep(std::size_t gateway, Priority band) const {
  const Gateway& gw = gateways_[gateway];
  std::optional<double> ceiling;
  if (gw.fc) {
    const FlowControllerStats stats = gw.fc->stats();
    for (const BandStats& b : stats.bands) {
      if (b.priority == band) ceiling = b.lastCeiling;
    }
  }
  return bookingKeep(reserveKeep_, ceiling, s_.pool.totalSlots());
}

TimePoint Simulation::reserveLease() const {
  if (replicaSyncers_.empty()) return TimePoint::max();  // one replica: no sync renews it
  return at(now_ + 3 * fromMs(s_.pool.replicaSyncIntervalMs));
}

void Simulation::reserveSchedule(Nanos t, const ReserveEvent& e) {
  const std::size_t index = reserveEvents_.size();
  reserveEvents_.push_back(e);
  schedule(t, EventType::kReserve, index);
}

void Simulation::reserveRoute(std::size_t id) {
  Request& r = requests_[id];
  Gateway& gw = gateways_[r.gateway];
  gw.fill();
  const std::size_t best =
      gw.picker.pick(gw.source->pool(), *detector_, at(now_), {}, r.input).value_or(0);
  r.parked = true;
  // A parked request holds no server: no eviction victim until it is sent (Ticket::setParked).
  if (arm_.eviction && gw.fc) (void)gw.fc->ticket(r.leaseId).setParked(true);
  r.state = State::kServerQueue;
  gw.reserve->park(
      {.priority = s_.classes[r.cls].priority, .enqueued = r.arrival, .id = id, .preferred = best});
  gw.fill();
  reservePump(r.gateway);
}

void Simulation::reservePump(std::size_t g) {
  Gateway& gw = gateways_[g];
  ReserveReplica& rr = *gw.reserve;
  if (rr.callInFlight) {
    rr.again = true;
    return;
  }
  if (rr.parked.empty()) return;
  rr.callInFlight = true;
  rr.again = false;
  // The endpoints in the replica's order of preference: the picker's, then the others by the
  // requests the replica's view counts on them (fewest first).
  const ReserveReplica::Parked head = rr.parked.front();
  const Request& r = requests_[head.id];
  gw.fill();
  std::span<const Endpoint> pool = gw.source->pool();
  const std::size_t best = gw.picker.pick(pool, *detector_, at(now_), {}, r.input).value_or(0);
  rr.candidates.resize(pool.size());
  std::iota(rr.candidates.begin(), rr.candidates.end(), std::size_t{0});
  std::stable_sort(rr.candidates.begin(), rr.candidates.end(), [&](std::size_t a, std::size_t b) {
    if ((a == best) != (b == best)) return a == best;
    return pool[a].runningRequests + pool[a].waitingQueueSize <
           pool[b].runningRequests + pool[b].waitingQueueSize;
  });
  rr.roomToSend();
  rr.keep = s_.classes[r.cls].priority >= reserveTop_ ? 0 : reserveBandKeep(g, head.priority);
  reserveSchedule(now_ + fromMs(s_.pool.replicaReserveRttMs / 2.0),
                  {.kind = ReserveEvent::Kind::kAtTable,
                   .gateway = static_cast<std::uint32_t>(g),
                   .request = head.id});
}

void Simulation::reserveRelease(std::size_t id) {
  reserveSchedule(
      now_ + fromMs(s_.pool.replicaReserveRttMs / 2.0),
      {.kind = ReserveEvent::Kind::kRelease, .gateway = requests_[id].gateway, .request = id});
}

void Simulation::reserveHandle(ReserveEvent e) {
  const Nanos half = fromMs(s_.pool.replicaReserveRttMs / 2.0);
  ReserveReplica& rr = *gateways_[e.gateway].reserve;
  switch (e.kind) {
    case ReserveEvent::Kind::kAtTable: {
      const Request& r = requests_[e.request];
      std::int64_t booked = -1;
      // Not revoked while the call was on its way; below the top class, the pool's reserve kept.
      if (r.parked && (s_.classes[r.cls].priority >= reserveTop_ ||
                       leavesPoolReserve(rr.sent, *table_, rr.keep))) {
        for (const std::size_t i : rr.candidates) {
          if (table_
                  ->tryReserve(i, rr.sent[i], e.gateway, e.request, r.input + r.output,
                               reserveLease())
                  .booked) {
            booked = static_cast<std::int64_t>(i);
            break;
          }
        }
      }
      reserveSchedule(now_ + half, {.kind = ReserveEvent::Kind::kReply,
                                    .gateway = e.gateway,
                                    .request = e.request,
                                    .endpoint = booked});
      break;
    }
    case ReserveEvent::Kind::kReply: {
      rr.callInFlight = false;
      Request& r = requests_[e.request];
      if (e.endpoint >= 0 && !r.parked) {
        reserveRelease(e.request);  // cancelled while the call was out: give the booking back
      } else if (e.endpoint >= 0) {
        rr.unpark(e.request);
        r.parked = false;
        if (arm_.eviction && gateways_[r.gateway].fc) {
          (void)gateways_[r.gateway].fc->ticket(r.leaseId).setParked(false);
        }
        sendTo(e.request, static_cast<std::size_t>(e.endpoint));
      }
      if (e.endpoint >= 0 || rr.again) {
        reservePump(e.gateway);  // the next head, or again after a change while the call was out
      } else if (!rr.retryScheduled && !rr.parked.empty()) {
        rr.retryScheduled = true;
        reserveSchedule(now_ + fromMs(s_.pool.replicaReserveRetryMs),
                        {.kind = ReserveEvent::Kind::kRetry, .gateway = e.gateway});
      }
      gateways_[e.gateway].fill();
      break;
    }
    case ReserveEvent::Kind::kRelease:
      if (!table_->release(e.gateway, e.request)) break;
      for (std::size_t h = 0; h < gateways_.size(); ++h) {  // the table notifies the waiting
        if (gateways_[h].reserve->parked.empty()) continue;
        reserveSchedule(now_ + half, {.kind = ReserveEvent::Kind::kNotice,
                                      .gateway = static_cast<std::uint32_t>(h)});
      }
      break;
    case ReserveEvent::Kind::kNotice:
      reservePump(e.gateway);
      break;
    case ReserveEvent::Kind::kRetry:
      rr.retryScheduled = false;
      if (rr.parked.empty()) break;
      reservePump(e.gateway);
      if (!rr.retryScheduled) {  // keep retrying while requests stay parked
        rr.retryScheduled = true;
        reserveSchedule(now_ + fromMs(s_.pool.replicaReserveRetryMs),
                        {.kind = ReserveEvent::Kind::kRetry, .gateway = e.gateway});
      }
      break;
  }
}

// The controller revoked a parked request: it holds no server and no booking, so it ends at
// once (its lease with it) and its client sends it again, as after an abort.
void Simulation::reserveCancel(std::size_t id) {
  Request& r = requests_[id];
  Gateway& gw = gateways_[r.gateway];
  gw.reserve->unpark(id);
  r.parked = false;
  r.state = State::kRevoked;
  r.finished = now_;
  ++aborted_;
  if (gw.fc && r.leaseId != 0) {
    gw.leases.erase(r.leaseId);
    (void)gw.fc->release(r.leaseId, at(now_));
  }
  gw.fill();
  const Request retry = retryOf(r, id, now_);
  submit(retry);  // may grow requests_: no reference into it from here on
}

void Simulation::reserveSync(std::size_t g) {
  if (g == 0) (void)table_->expire(at(now_));
  (void)table_->renew(static_cast<std::int64_t>(g), reserveLease());
}

void Simulation::reserveScraped(std::size_t g) {
  ReserveReplica& rr = *gateways_[g].reserve;
  rr.scrapedNow();
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    const Server& sv = servers_[i];
    rr.scraped[i] = ReservationRoom{
        .slots = sv.spec.slots,
        .kvCapacityTokens = sv.spec.kvCapacityTokens,
        .scrapedSlotsUsed = static_cast<std::int64_t>(sv.running.size() + sv.queue.size()),
        .scrapedKvUsed = sv.kvTokens};
  }
}

}  // namespace detail
}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
