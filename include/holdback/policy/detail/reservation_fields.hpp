// The configuration keys of reservation-holdback-policy: one row per key
// (core/field_table.hpp). validate() checks the rows; config/policy_config reads them, and the
// effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after policy/reservation.hpp (its -inl.hpp and the config layer include it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {
inline constexpr std::string_view kReserveRestorationDerives =
    "remove it; on unless flowControl.eviction.restoreReserve is on, which repairs the reserve "
    "instead";
}  // namespace detail

// epsilons (a priority map) and feedback (a nested block) are read, checked and written by hand;
// their rows carry their deprecation.
inline constexpr std::array<Field<ReservationOptions>, 17> kReservationFields = {{
    {.key = "epsilon",
     .bind = bind<&ReservationOptions::epsilon>(),
     .use = FieldUse::kCommon,
     .meaning = "the probability of a higher band's burst finding no room that the reserve is "
                "sized for: smaller protects more and holds more room back",
     .checks = {outside("(0.0, 0.5]")}},
    {.key = "epsilons",
     .deprecated = "remove it; one epsilon for every band, which reserve restoration aims for "
                   "too"},
    {.key = "minCeiling",
     .bind = bind<&ReservationOptions::minCeiling>(),
     .use = FieldUse::kCommon,
     .meaning = "no band's ceiling goes below this, so the lowest band always gets some of the "
                "pool",
     .checks = {outside("[0.0, 1.0)")}},
    {.key = "maxCeiling",
     .bind = bind<&ReservationOptions::maxCeiling>(),
     .checks = {outside("(0.0, 1.0]")},
     .deprecated = "remove it; the top band's ceiling is 1.0 (the detector's thresholds and "
                   "headroom bound the pool)",
     .checkedBefore = "minCeiling"},
    {.key = "minReserve",
     .bind = bind<&ReservationOptions::minReserve>(),
     .use = FieldUse::kCommon,
     .meaning = "the reserve never falls below this many requests: room kept for a burst's first "
                "arrivals, before the demand estimate rises",
     .checks = {must("[0, inf)", "must be a finite number >= 0")}},
    {.key = "minReserveShare",
     .bind = bind<&ReservationOptions::minReserveShare>(),
     .meaning = "the reserve never falls below this share of the pool; unlike `minReserve` it "
                "follows the pool when servers are added or removed",
     .checks = {outside("[0.0, 1.0)")}},
    {.key = "refillHorizon",
     .bind = bind<&ReservationOptions::refillHorizon>(),
     .checks = {must("[0, inf]", "must not be negative", CheckForm::kBare)},
     .deprecated = "remove it; estimated from the lower bands' requests in flight and their "
                   "holding times"},
    {.key = "requestUnit",
     .bind = bind<&ReservationOptions::requestUnit>(),
     .checks = {outside("(0.0, 1.0]")},
     .deprecated = "remove it; the controller reports the saturation per request in flight"},
    {.key = "riseTime",
     .bind = bind<&ReservationOptions::smoothing, &DemandSmoothing::rise>(),
     .use = FieldUse::kCommon,
     .meaning = "how fast a band's measured demand rises: shorter reacts to a burst sooner",
     .checks = {must("(0, inf]", "must be positive", CheckForm::kBare)}},
    {.key = "decayTime",
     .bind = bind<&ReservationOptions::smoothing, &DemandSmoothing::decay>(),
     .use = FieldUse::kCommon,
     .meaning = "how fast it decays after a burst: shorter gives the room back to lower bands "
                "sooner",
     .checks = {must("(0, inf]", "must be positive", CheckForm::kBare)}},
    {.key = "riseSignificance",
     .bind = bind<&ReservationOptions::smoothing, &DemandSmoothing::riseSignificance>(),
     .meaning = "z: the demand estimate follows a rise in arrivals only when it exceeds the long "
                "average by z standard deviations of Poisson noise, so a steady rate is not "
                "mistaken for a burst; `0` = every rise (noise included)",
     .checks = {outside("[0, 10]")}},
    {.key = "holdReserve",
     .bind = bind<&ReservationOptions::holdReserve>(),
     .deprecated = detail::kReserveRestorationDerives},
    {.key = "protectiveStart",
     .bind = bind<&ReservationOptions::protectiveStart>(),
     .deprecated = detail::kReserveRestorationDerives},
    {.key = "sizing",
     .bind = bind<&ReservationOptions::sizing>(),
     .choices = choices<ReservationSizing>(
         {{"refill", ReservationSizing::kRefill}, {"occupancy", ReservationSizing::kOccupancy}}),
     .deprecated = kAblationSwitch},
    {.key = "poissonSizing",
     .bind = bind<&ReservationOptions::poissonSizing>(),
     .meaning = "`false`: a fixed reserve of `minReserve`, for a small pool where a steady "
                "protected stream outruns its turnover and the measured sizing would reserve all "
                "of it (the example gateway's built-in configuration); `true`: sized from the "
                "measured demand"},
    {.key = "capacityModel",
     .bind = bind<&ReservationOptions::capacityModel>(),
     .use = FieldUse::kCommon,
     .meaning = "`pooled` (the reserve converted with the pool's mean footprint) or `endpoints` "
                "(protected requests' own footprints, room that exists on some endpoint, in "
                "slots and KV tokens: for requests of very different sizes)",
     .choices = choices<ReservationCapacity>({{"pooled", ReservationCapacity::kPooled},
                                              {"endpoints", ReservationCapacity::kEndpoints}})},
    {.key = "feedback", .deprecated = kAblationSwitch},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
