// Capacity in the two resources an LLM server runs out of: batch slots and KV-cache tokens.
//
//   EndpointRoom  one endpoint's free capacity, in slots and in KV tokens, before the limits of
//                 the detector that measured it (SaturationDetector::room)
//   BandRoom      the pool's room for the requests a priority band's holdback protects, counted
//                 in whole requests of their footprint, endpoint by endpoint
//   bandRoom()    BandRoom from the endpoints' room and two footprints
//
// The footprint of a request is one slot and its KV tokens: input + expected output, held until
// the end of its stream. A request *fits* an endpoint when the endpoint has a free slot and KV
// for its footprint. Room is counted where it exists: an endpoint with three free slots and KV
// for one request has room for one, and two endpoints with half a request's KV each have room
// for none (no pool-wide sum of fragments).
//
//   fit(room, f) = min(floor(room.slots), floor(room.kvTokens / f))
//   fits         = sum over endpoints of fit(room_e, protected)
//   fitsAfter    = fits - min over the endpoints e where one request of `own` starts of
//                  (fit(room_e, protected) - fit(room_e less one slot and `own` tokens,
//                  protected)): the room left once one request of the band is placed where it
//                  takes the fewest protected requests' room; -infinity when it starts nowhere
//
// Where a request of the band starts: a free slot and KV for its footprint. A detector whose KV
// room stops at a threshold below the cache's size (the utilization detector's
// kvCacheUtilThreshold) also reports the KV left in the whole cache (kvCapacityLeft); there a
// request also starts where some room remains below the threshold and its footprint fits in
// the whole cache, as the detector itself admits work to an endpoint below its threshold
// whatever the request's size. The protected room it leaves there is what remains below the
// threshold (none when it runs past it). Protected requests are counted below the threshold
// only.
//
// Unbounded resources: +infinity slots or tokens means the resource is not counted (a
// detector that counts only requests reports kvTokens = +infinity); a footprint <= 0 or NaN
// needs no KV. Bad input: NaN or negative room counts as none (0), so an endpoint with broken
// telemetry offers no room. Nothing allocates or throws.
//
// Thread safety: plain values and pure functions.
#pragma once

#include "holdback/abi.hpp"

#include <cmath>
#include <limits>
#include <span>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// One endpoint's free capacity (see the file comment). +infinity: the resource is not counted.
struct EndpointRoom {
  double slots = 0.0;
  double kvTokens = 0.0;
  // KV tokens free in the endpoint's whole cache where kvTokens stops short of it at a
  // threshold (see the file comment); 0 = no such threshold: a request needs its footprint in
  // kvTokens.
  double kvCapacityLeft = 0.0;
};

// The pool's room for a band's protected requests (see the file comment). NaN: unknown (no
// detector room, no footprint measured yet).
struct BandRoom {
  double fits = std::numeric_limits<double>::quiet_NaN();
  double fitsAfter = std::numeric_limits<double>::quiet_NaN();
};

namespace detail {

[[nodiscard]] inline double roomCount(double v) noexcept {
  return v > 0.0 ? v : 0.0;  // NaN and negatives: none
}

// Whole requests of `footprint` tokens that fit into `room` (+infinity when neither resource
// binds).
[[nodiscard]] inline double fitCount(double slots, double kvTokens, double footprint) noexcept {
  const double s = std::floor(roomCount(slots));
  const double kv = roomCount(kvTokens);
  if (!(footprint > 0.0) || std::isinf(kv)) return s;  // KV not needed, or not counted
  const double k = std::floor(kv / footprint);         // an infinite footprint fits nowhere: 0
  return s < k ? s : k;
}

}  // namespace detail

// fits and fitsAfter for protected requests of `protectedTokens` and one request of `ownTokens`
// (see the file comment). O(endpoints).
[[nodiscard]] inline BandRoom bandRoom(std::span<const EndpointRoom> endpoints,
                                       double protectedTokens, double ownTokens) noexcept {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double fits = 0.0;
  double least = kInf;  // the fewest protected fits one request of `own` takes
  for (const EndpointRoom& e : endpoints) {
    const double slots = detail::roomCount(e.slots);
    const double kv = detail::roomCount(e.kvTokens);
    const double here = detail::fitCount(slots, kv, protectedTokens);
    fits += here;
    const double own = ownTokens > 0.0 ? ownTokens : 0.0;
    // Below a threshold the request may run past it, within the whole cache.
    const bool starts = kv >= own || (kv > 0.0 && detail::roomCount(e.kvCapacityLeft) >= own);
    if (slots >= 1.0 && starts) {
      // Uncounted KV (+infinity) stays uncounted whatever the request needs.
      const double left = kv > own ? kv - own : 0.0;
      const double after =
          detail::fitCount(slots - 1.0, std::isinf(kv) ? kv : left, protectedTokens);
      const double taken = here - after;  // inf - inf (both unbounded) is NaN: takes nothing
      const double cost = taken > 0.0 ? taken : 0.0;
      if (cost < least) least = cost;
    }
  }
  BandRoom out;
  out.fits = fits;
  out.fitsAfter = least == kInf ? -kInf : fits - least;
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
