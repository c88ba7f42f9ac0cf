// The configuration keys of the host's dispatch ledger (flowControl.dispatchLedger): one row per
// key (core/field_table.hpp). validate() checks the rows; config/dispatch_ledger_config reads
// them, and the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after detector/dispatch_ledger.hpp (its -inl.hpp and the config layer include
// it). Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/detector/dispatch_ledger.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

static_assert(DispatchLedgerOptions::kMaxReplicas == 1024, "the replicas row says [1, 1024]");

// sharedRoomSlots is the host's (replica sync), not a key; validate() checks it by hand. The three
// ablation switches are warned about before budgetQueueDepth, as before the table.
inline constexpr std::array<Field<DispatchLedgerOptions>, 8> kDispatchLedgerFields = {{
    {.key = "correction",
     .bind = bind<&DispatchLedgerOptions::correction>(),
     .meaning = "the host's dispatch ledger (either detector): correct scraped telemetry with the "
                "dispatches the last scrape cannot have seen, so a burst between scrapes does not "
                "overfill an endpoint; `false` only for a host that does not report dispatches"},
    {.key = "scrapeMarginRequests",
     .bind = bind<&DispatchLedgerOptions::scrapeMarginRequests>(),
     .checks = {must("[0, inf]", "is negative; expected an integer >= 0")},
     .deprecated = kAblationSwitch},
    {.key = "dispatchBudget",
     .bind = bind<&DispatchLedgerOptions::dispatchBudget>(),
     .meaning = "a safety net for a host whose completion reports are unreliable (early or "
                "twice): cap dispatches per endpoint between scrapes at the room the last scrape "
                "showed"},
    {.key = "budgetQueueDepth",
     .bind = bind<&DispatchLedgerOptions::budgetQueueDepth>(),
     .checks = {must("(0, inf]", "is not strictly positive; expected an integer > 0")},
     .deprecated = "remove it; the budget fills the waiting queue up to the utilization "
                   "detector's queueDepthThreshold (else 5)"},
    {.key = "replicas",
     .bind = bind<&DispatchLedgerOptions::replicas>(),
     .meaning = "gateway replicas sharing the pool without replica sync: each assumes the others "
                "dispatch as much as it does (and no replica starts a request past the KV "
                "threshold)",
     .checks = {integerIn("[1, 1024]")},
     .min = 1,
     .max = DispatchLedgerOptions::kMaxReplicas},
    {.key = "slotCountFromScrapes",
     .bind = bind<&DispatchLedgerOptions::slotCountFromScrapes>(),
     .deprecated = kAblationSwitch,
     .checkedBefore = "budgetQueueDepth"},
    {.key = "creditCompletions",
     .bind = bind<&DispatchLedgerOptions::creditCompletions>(),
     .deprecated = kAblationSwitch,
     .checkedBefore = "budgetQueueDepth"},
    {.key = "reconcileInFlight",
     .bind = bind<&DispatchLedgerOptions::reconcileInFlight>(),
     .deprecated = kAblationSwitch,
     .checkedBefore = "budgetQueueDepth"},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
