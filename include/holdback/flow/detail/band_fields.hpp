// The configuration keys of a band (flowControl.defaultPriorityBand, defaultNegativePriorityBand
// and each entry of priorityBands): one row per key (core/field_table.hpp). The whole-file loader
// reads them, and the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after flow/options.hpp (the config layer includes it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <limits>

#include "holdback/core/field_table.hpp"
#include "holdback/flow/options.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The limits read 0 as the default (kDefaultBandMaxRequests, kDefaultBandMaxBytes); the two refs
// are resolved to plugins by hand and written as the plugin (type and parameters); the weight is
// read by hand and checked by validateBandWeight() (0, or a number in [1, 1e6]: no single
// interval), written from its binding. priority is written for the entries of priorityBands only.
// Order: the effective configuration's; readBefore keeps the loader's reading order.
inline constexpr std::array<Field<BandOptions>, 7> kBandFields = {{
    {.key = "priority",
     .bind = bind<&BandOptions::priority>(),
     .use = FieldUse::kCommon,
     .meaning = "the band's priority (higher is served first); unique across `priorityBands`",
     .min = std::numeric_limits<Priority>::min(),
     .max = std::numeric_limits<Priority>::max()},
    {.key = "maxRequests",
     .bind = bind<&BandOptions::maxRequests>(),
     .use = FieldUse::kCommon,
     .meaning = "cap on the band's queued requests, so one band cannot fill the queue; 0 = the "
                "default (5000)",
     .kind = FieldKind::kQuantity,
     .label = "MaxRequests"},
    {.key = "maxBytes",
     .bind = bind<&BandOptions::maxBytes>(),
     .meaning = "cap on the band's queued bytes; 0 = the default (1 GB)",
     .kind = FieldKind::kQuantity,
     .label = "MaxBytes",
     .readBefore = "maxRequests"},
    {.key = "defaultRequestTTL",
     .bind = bind<&BandOptions::requestTtl>(),
     .use = FieldUse::kCommon,
     .meaning = "the band's queue TTL (e.g. shorter for interactive traffic that is useless "
                "late); the smallest of request, band and `flowControl.defaultRequestTTL` wins; "
                "`0s` = not set",
     .kind = FieldKind::kFlowDuration,
     .label = "DefaultRequestTTL"},
    {.key = "fairnessPolicyRef",
     .use = FieldUse::kCommon,
     .meaning = "how the band picks among its flows (tenants, programs): a fairness policy below",
     .kind = FieldKind::kStructured,
     .writtenAs = "fairnessPolicy"},
    {.key = "orderingPolicyRef",
     .use = FieldUse::kCommon,
     .meaning = "how a flow orders its requests (first come, deadline): an ordering policy below",
     .kind = FieldKind::kStructured,
     .writtenAs = "orderingPolicy"},
    {.key = "weight",
     .bind = bind<&BandOptions::weight>(),
     .meaning = "the band's share of dispatches under `weighted-fair` scheduling; 0 = derived "
                "from its position (lowest band 1, the next 2, ...)",
     .kind = FieldKind::kStructured,
     .readBefore = "fairnessPolicyRef"},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
