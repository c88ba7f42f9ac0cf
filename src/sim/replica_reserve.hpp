// Private to src/sim: a replica's side of reserve mode (pool.replicaMode: reserve; the protocol
// is docs/design/replicas.md). Each replica keeps the requests its controller dispatched that
// hold no booking yet (parked, in the order priority desc, enqueue time asc), at most one
// reservation call in flight to the table and its own latest scrape of every endpoint (the room it
// sends with each call). The engine's side is in replica_reserve.cpp. Not installed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "holdback/core/endpoint.hpp"
#include "holdback/detector/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim::detail {

// The pool-wide term of a booking below the top band (docs/design/replicas.md, "The table"): the
// free slots over the pool, sum of max(0, slots - max(room's used, booked)) per endpoint, less the
// request's own slot, leave at least `keep` (the policy's fixed reserve, rounded up). `rooms`:
// the calling replica's rooms; `table`: the live bookings.
inline bool leavesPoolReserve(std::span<const ReservationRoom> rooms, const ReservationTable& table,
                              std::int64_t keep) {
  if (keep <= 0) return true;
  std::int64_t free = 0;
  for (std::size_t i = 0; i < rooms.size(); ++i) {
    const std::int64_t used = std::max(rooms[i].scrapedSlotsUsed, table.booked(i).slots);
    free += std::max<std::int64_t>(0, rooms[i].slots - used);
  }
  return free - 1 >= keep;
}

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
  bool again = false;                    // a trigger came while the call was in flight
  bool retryScheduled = false;           // the retry timer is set
  std::vector<ReservationRoom> scraped;  // [endpoint]: this replica's latest scrape
  std::vector<ReservationRoom> sent;     // [endpoint]: the room sent with the call in flight
  std::vector<double> parkedOn;          // [endpoint]: parked requests preferring it
  std::vector<std::size_t> candidates;   // the call in flight: endpoints, best first

  explicit ReserveReplica(std::size_t endpoints)
      : scraped(endpoints), sent(endpoints), parkedOn(endpoints, 0.0) {}

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

  // The room a call carries (into `sent`): each endpoint's latest scrape, its slots in use less
  // the requests that ended since, as the replica's view `pool` counts them (its ledger credits
  // completions in reserve mode: the slots its own and the feed's completions freed since the
  // scrape); the view's parked requests are taken out again. Never above the scrape: the
  // dispatches since are the table's bookings. KV is the scrape's, as the ledger's credit.
  void roomToSend(std::span<const Endpoint> pool) {
    for (std::size_t i = 0; i < sent.size(); ++i) {
      sent[i] = scraped[i];
      if (i >= pool.size()) continue;
      const double seen = pool[i].runningRequests + pool[i].waitingQueueSize - parkedOn[i];
      const auto used = static_cast<std::int64_t>(std::llround(std::max(0.0, seen)));
      sent[i].scrapedSlotsUsed = std::min(sent[i].scrapedSlotsUsed, used);
    }
  }

  // The replica's view in reserve mode, after its ledger's fill (its own dispatches, the
  // others' on the feed, the scrape): its parked requests wait at the endpoint they prefer, as
  // they would in its server queue in share mode, so that its detector sees them as the load
  // they are. The table's bookings are not put in the view (docs/design/replicas.md, "View").
  void overlay(std::span<Endpoint> pool) const {
    for (std::size_t i = 0; i < pool.size() && i < parkedOn.size(); ++i) {
      if (parkedOn[i] <= 0.0) continue;
      Endpoint& e = pool[i];
      const double on = e.runningRequests + e.waitingQueueSize;
      const double total = on + parkedOn[i];
      const auto slots = static_cast<double>(e.maxRunningRequests);
      if (slots > 0.0) {  // the extra requests run while there are free slots, then wait
        e.runningRequests = std::min(total, std::max(slots, e.runningRequests));
        e.waitingQueueSize = total - e.runningRequests;
      } else {
        e.waitingQueueSize += parkedOn[i];
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
