// The configuration keys of in-flight eviction (flowControl.eviction and its restoreReserve
// block): one row per key (core/field_table.hpp). The whole-file loader reads them, and the
// effective configuration and docs/reference/configuration.md show them; validateEvictionOptions()
// keeps the struct's own checks (a host building EvictionOptions in C++ gets the same).
//
// Internal: read it after flow/eviction.hpp (the config layer includes it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstdint>

#include "holdback/core/field_table.hpp"
#include "holdback/flow/eviction.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// flowControl.eviction.restoreReserve: the block's presence turns it on (enabled defaults to true
// in a file); epsilon is read by hand and checked there while restoration is off
// (validateEvictionOptions checks it while on), written from its binding.
inline constexpr bool evictionBudgetOn(const ReserveRestoreOptions& o) noexcept {
  return o.evictionBudget > 0.0;
}
inline constexpr bool wasteBudgetOn(const ReserveRestoreOptions& o) noexcept {
  return o.wasteBudget > 0.0;
}
inline constexpr bool burstTriggerOn(const ReserveRestoreOptions& o) noexcept {
  return o.burstSignificance > 0.0;
}

// The budgets (evictionBudget, evictionBurst, wasteBudget, wasteBurst) and burstSignificance are
// checked by validateEvictionOptions and written to the effective configuration only while on.
inline constexpr std::array<Field<ReserveRestoreOptions>, 9> kReserveRestoreFields = {{
    {.key = "enabled",
     .bind = bind<&ReserveRestoreOptions::enabled>(),
     .use = FieldUse::kCommon,
     .meaning = "revoke sheddable requests to restore the reservation policy's reserve after a "
                "burst took it (aiming for the policy's `epsilon`); with it the policy neither "
                "holds its reserve nor starts protective (the block's presence turns it on)"},
    {.key = "epsilon",
     .bind = bind<&ReserveRestoreOptions::epsilon>(),
     .kind = FieldKind::kStructured,
     .deprecated = "remove it; restoration aims for the reservation policy's epsilon"},
    {.key = "leadTime",
     .bind = bind<&ReserveRestoreOptions::leadTime>(),
     .kind = FieldKind::kFlowDuration,
     .label = "restoreReserve leadTime",
     .deprecated = kAblationSwitch},
    {.key = "burstMemory",
     .bind = bind<&ReserveRestoreOptions::burstMemory>(),
     .kind = FieldKind::kFlowDuration,
     .label = "restoreReserve burstMemory",
     .deprecated = kAblationSwitch},
    {.key = "evictionBudget",
     .bind = bind<&ReserveRestoreOptions::evictionBudget>(),
     .meaning = "at most this many revocations by restoration per request started in a "
                "protected band, with `evictionBurst` saved up; when spent, restoration waits "
                "(0 = no budget)",
     .when = evictionBudgetOn},
    {.key = "evictionBurst",
     .bind = bind<&ReserveRestoreOptions::evictionBurst>(),
     .meaning = "the revocations the eviction budget saves up at most (its bucket)",
     .when = evictionBudgetOn},
    {.key = "wasteBudget",
     .bind = bind<&ReserveRestoreOptions::wasteBudget>(),
     .meaning = "the slot time of revoked requests at most this share of the slot time of the "
                "sheddable requests that completed, with `wasteBurst` saved up; when spent, "
                "restoration waits (0 = no budget)",
     .when = wasteBudgetOn},
    {.key = "wasteBurst",
     .bind = bind<&ReserveRestoreOptions::wasteBurst>(),
     .meaning = "the slot time the waste budget saves up at most (its bucket)",
     .kind = FieldKind::kFlowDuration,
     .label = "restoreReserve wasteBurst",
     .when = wasteBudgetOn},
    {.key = "burstSignificance",
     .bind = bind<&ReserveRestoreOptions::burstSignificance>(),
     .meaning = "restore only while a protected band is in a burst: its arrivals' average over "
                "the policy's `riseTime` rose this many standard deviations above the one over "
                "`decayTime`, until both are back near the rate before it; at other times "
                "`revokeOnBlock` revokes for the highest band only (0 = restore at any time)",
     .when = burstTriggerOn},
}};

// flowControl.eviction. Upstream keeps maxRevocationsPerDecision and confirmationTimeout internal
// (the grace too, derived from the detector, which a host with the slot term shortens); the two
// victim-choice improvements are the benchmark's switches. waitForReleasesTolerance turns
// waitForReleases on (read and written by hand); restoreReserve is the block above. The filter
// and the order are plugins of the file, not keys.
inline constexpr std::array<Field<EvictionOptions>, 7> kEvictionFields = {{
    {.key = "maxRevocationsPerDecision",
     .bind = bind<&EvictionOptions::maxRevocationsPerDecision>(),
     .min = 1,
     .max = static_cast<std::int64_t>(kMaxRevocationsPerDecisionLimit),
     .deprecated = "remove it; 2, as upstream, which keeps it internal"},
    {.key = "confirmationTimeout",
     .bind = bind<&EvictionOptions::confirmationTimeout>(),
     .kind = FieldKind::kFlowDuration,
     .label = "EvictionConfirmationTimeout",
     .deprecated = "remove it; 10s, as upstream, which keeps it internal"},
    {.key = "confirmationGrace",
     .bind = bind<&EvictionOptions::confirmationGrace>(),
     .meaning = "after a confirmed revocation, how long the controller waits for telemetry to "
                "show the freed room before deciding again; derived from the detector "
                "(upstream's wiring), shorten it to a few scrape intervals when the detector has "
                "the slot term (`maxRunningRequests`), which sees an aborted request at once; "
                "below the sensor's lag it over-evicts",
     .kind = FieldKind::kFlowDuration,
     .label = "EvictionConfirmationGrace"},
    {.key = "waitForReleasesTolerance",
     .kind = FieldKind::kStructured,
     .deprecated = kAblationSwitch},
    {.key = "footprintAware",
     .bind = bind<&EvictionOptions::footprintAware>(),
     .deprecated = kAblationSwitch},
    {.key = "revokeOnBlock",
     .bind = bind<&EvictionOptions::revokeOnBlock>(),
     .use = FieldUse::kCommon,
     .meaning = "revoke when a protected band's head is blocked by the ceiling (upstream's "
                "trigger); `false` leaves reserve restoration alone, as the recommended "
                "configuration does"},
    {.key = "restoreReserve", .kind = FieldKind::kStructured},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
