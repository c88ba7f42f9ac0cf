// Private to src/sim: a replica's side of reserve mode (pool.replicaMode: reserve; the protocol
// is docs/design/replicas.md). Each replica keeps the requests its controller dispatched that
// hold no booking yet (parked, in the order priority desc, enqueue time asc), at most one
// reservation call in flight to the table, the bookings the table last reported and its own
// latest scrape of every endpoint (the room it sends with each call). The engine's side is in
// replica_reserve.cpp. Not installed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "holdback/core/endpoint.hpp"
#include "holdback/detector/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim::detail {

// One replica's reserve state.
struct ReserveReplica {
  struct Parked {
    std::int32_t priority = 0;
    std::int64_t enqueued = 0;  // the request's arrival (ns)
    std::size_t id = 0;         // the request
    std::size_t preferred = 0;  // the picker's endpoint at dispatch (the view counts it there)
  };
  std::vector<Parked> parked;  // priority desc, then enqueued asc, then id asc
  bool callInFlight = false;
  bool again = false;                      // a trigger came while the call was in flight
  bool retryScheduled = false;             // the retry timer is set
  std::vector<ReservationRoom> scraped;    // [endpoint]: this replica's latest scrape
  std::vector<ReservationBooked> seen;     // [endpoint]: the bookings as the table last reported
  std::vector<double> parkedOn;            // [endpoint]: parked requests preferring it
  std::vector<std::size_t> candidates;     // the call in flight: endpoints, best first
  std::vector<ReservationBooked> replied;  // the call in flight: the bookings its reply carries

  explicit ReserveReplica(std::size_t endpoints)
      : scraped(endpoints), seen(endpoints), parkedOn(endpoints, 0.0) {}

  void park(const Parked& p) {
    const auto at = std::find_if(parked.begin(), parked.end(), [&](const Parked& q) {
      return q.priority != p.priority
                 ? q.priority < p.priority
                 : (q.enqueued != p.enqueued ? q.enqueued > p.enqueued : q.id > p.id);
    });
    parked.insert(at, p);
    parkedOn[p.preferred] += 1.0;
  }
  // Removes request `id` from the list; false when it is not parked.
  bool unpark(std::size_t id) {
    const auto it =
        std::find_if(parked.begin(), parked.end(), [&](const Parked& q) { return q.id == id; });
    if (it == parked.end()) return false;
    parkedOn[it->preferred] -= 1.0;
    parked.erase(it);
    return true;
  }

  // A request left endpoint `e` (this replica's completion, or another's on the feed): the
  // bookings last reported drop by its footprint, so that they stay a lower bound of the
  // endpoint's bookings until the next reply or sync (at 0 at the least).
  void forget(std::size_t e, std::int64_t tokens) {
    if (e >= seen.size()) return;
    seen[e].slots = std::max<std::int64_t>(0, seen[e].slots - 1);
    seen[e].kvTokens = std::max<std::int64_t>(0, seen[e].kvTokens - tokens);
  }

  // The replica's view in reserve mode, after its ledger's fill: per endpoint, the requests on
  // it are at least the table's live bookings (as last reported), and this replica's parked
  // requests wait at the endpoint they prefer (as they would in its server queue in share mode),
  // so that its detector sees them as the load they are.
  void overlay(std::span<Endpoint> pool) const {
    for (std::size_t i = 0; i < pool.size() && i < seen.size(); ++i) {
      Endpoint& e = pool[i];
      const double on = e.runningRequests + e.waitingQueueSize;
      const double total = std::max(on, static_cast<double>(seen[i].slots)) + parkedOn[i];
      if (total == on) continue;
      const auto slots = static_cast<double>(e.maxRunningRequests);
      if (slots > 0.0) {  // the extra requests run while there are free slots, then wait
        e.runningRequests = std::min(total, std::max(slots, e.runningRequests));
        e.waitingQueueSize = total - e.runningRequests;
      } else {
        e.waitingQueueSize += total - on;
      }
    }
  }
};

// A reserve-mode event (EventType::kReserve; index: into Simulation::reserveEvents_).
struct ReserveEvent {
  enum class Kind : std::uint8_t {
    kAtTable,  // a replica's call reaches the table (gateway)
    kReply,    // the table's reply reaches the replica (gateway, request, endpoint or -1)
    kRelease,  // a booking's release reaches the table (gateway, request)
    kNotice,   // the table's notice of a release reaches a replica (gateway)
    kRetry     // a replica's retry timer (gateway)
  };
  Kind kind = Kind::kAtTable;
  std::uint32_t gateway = 0;
  std::size_t request = 0;
  std::int64_t endpoint = -1;
};

}  // namespace sim::detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
