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
#include <optional>
#include <span>
#include <vector>

#include "holdback/core/endpoint.hpp"
#include "holdback/detector/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim::detail {

// The pool-wide term of a booking below the top band (docs/design/replicas.md, "The table"): the
// free slots over the pool, sum of max(0, slots - max(room's used, booked)) per endpoint, less the
// request's own slot, leave at least `keep` (bookingKeep). `rooms`: the calling replica's rooms;
// `table`: the live bookings.
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

// The free slots a booking below the top band must leave over the pool: the policy's fixed
// reserve (`fixed`, rounded up), or the room the band's ceiling keeps free at the calling
// replica when that is more, (1 - ceiling) x the pool's slots rounded up (its gate holds the band
// there; the table holds a booking made later, a parked request's, to the same). No ceiling
// (the band not in the policy's domain yet): the fixed reserve alone.
inline std::int64_t bookingKeep(std::int64_t fixed, std::optional<double> ceiling,
                                std::int64_t poolSlots) {
  if (!ceiling || !std::isfinite(*ceiling) || poolSlots <= 0) return fixed;
  const double room = (1.0 - std::clamp(*ceiling, 0.0, 1.0)) * static_cast<double>(poolSlots);
  // A ceiling computed in saturation units lands a hair off the whole request it stands for.
  return std::max(fixed, static_cast<std::int64_t>(std::ceil(room - 1e-6)));
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
  std::vector<std::int64_t> endedSlots;  // [endpoint]: requests that left it since the scrape
  std::vector<std::int64_t> endedKv;     // [endpoint]: and their footprints (KV tokens)
  std::vector<std::size_t> candidates;   // the call in flight: endpoints, best first
  std::int64_t keep = 0;  // the call in flight: the free slots its booking leaves over the pool

  explicit ReserveReplica(std::size_t endpoints)
      : scraped(endpoints),
        sent(endpoints),
        parkedOn(endpoints, 0.0),
        endedSlots(endpoints, 0),
        endedKv(endpoints, 0) {}

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

  // A request that held a slot on endpoint `e` left it (its own completion or abort, or another
  // replica's on the feed), with its footprint of `kvTokens`: the room is free before this
  // replica's next scrape shows it.
  void ended(std::size_t e, std::int64_t kvTokens) {
    if (e >= endedSlots.size()) return;
    ++endedSlots[e];
    endedKv[e] += std::max<std::int64_t>(0, kvTokens);
  }
  // This replica scraped the pool: its counts of ended requests start again.
  void scrapedNow() {
    std::fill(endedSlots.begin(), endedSlots.end(), std::int64_t{0});
    std::fill(endedKv.begin(), endedKv.end(), std::int64_t{0});
  }

  // The room a call carries (into `sent`): each endpoint's latest scrape less the requests that
  // ended there since, slots and KV (the table books a freed slot once, however many replicas
  // see it free). The footprint credited can exceed the KV a request held (its output not all
  // generated): the table's bookings, every request's whole footprint, still bound the KV used.
  // The dispatches since the scrape are the table's bookings. The replica's view (its ledger)
  // is not credited so: its controller dispatches on the scrape.
  void roomToSend() {
    for (std::size_t i = 0; i < sent.size(); ++i) {
      sent[i] = scraped[i];
      sent[i].scrapedSlotsUsed =
          std::max<std::int64_t>(0, scraped[i].scrapedSlotsUsed - endedSlots[i]);
      sent[i].scrapedKvUsed = std::max<std::int64_t>(0, scraped[i].scrapedKvUsed - endedKv[i]);
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
