// The configuration keys of utilization-detector: one row per key (core/field_table.hpp).
// validate() checks the rows; config/detector_config reads them, and the effective configuration
// and docs/reference/configuration.md show them.
//
// Internal: read it after detector/detectors.hpp (its -inl.hpp and the config layer include it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {
inline constexpr std::string_view kReferenceProfileSets =
    "remove it; flowControl.profile: reference sets Go's value";
}  // namespace detail

// endpointScoreCap is a number or "none" (uncapped): read and written by hand, checked from its
// row. The deprecated dispatchLedger block is not a detector key (config/dispatch_ledger_config).
inline constexpr std::array<Field<UtilizationDetectorOptions>, 11> kUtilizationDetectorFields = {{
    {.key = "queueDepthThreshold",
     .bind = bind<&UtilizationDetectorOptions::queueDepthThreshold>(),
     .use = FieldUse::kCommon,
     .meaning = "an endpoint with this many waiting requests reads saturated",
     .checks = detail::kPositiveCountChecks,
     .kind = FieldKind::kCount},
    {.key = "kvCacheUtilThreshold",
     .bind = bind<&UtilizationDetectorOptions::kvCacheUtilThreshold>(),
     .use = FieldUse::kCommon,
     .meaning = "an endpoint at this KV-cache usage reads saturated",
     .checks = {outside("(0.0, 1.0]")}},
    {.key = "metricsStalenessThreshold",
     .bind = bind<&UtilizationDetectorOptions::metricsStalenessThreshold>(),
     .use = FieldUse::kCommon,
     .meaning = "metrics older than this are stale (see `stalenessPolicy`); a few scrape "
                "intervals",
     .checks = {must("(0, inf]",
                     "is not strictly positive; expected a duration > 0 such as \"200ms\"")},
     .kind = FieldKind::kGoDuration},
    {.key = "headroom",
     .bind = bind<&UtilizationDetectorOptions::headroom>(),
     .meaning = detail::kHeadroomMeaning,
     .checks = detail::kHeadroomChecks},
    {.key = "aggregation",
     .bind = bind<&UtilizationDetectorOptions::aggregation>(),
     .meaning = "how endpoint scores become the pool's saturation: `mean`, `max`, `weighted` by "
                "the endpoints' weights, or `capacity`: weighted by each endpoint's slots (mixed "
                "pools; exactly the mean on a pool of one size)",
     .choices = choices<Aggregation>({{"mean", Aggregation::kMean},
                                      {"max", Aggregation::kMax},
                                      {"weighted", Aggregation::kWeighted},
                                      {"capacity", Aggregation::kCapacity}})},
    {.key = "stalenessPolicy",
     .bind = bind<&UtilizationDetectorOptions::stalenessPolicy>(),
     .meaning = "a stale endpoint reads `saturated` (safe) or is `ignore`d (keeps serving when "
                "scrapes fail)",
     .choices = choices<StalenessPolicy>(
         {{"saturated", StalenessPolicy::kSaturated}, {"ignore", StalenessPolicy::kIgnore}})},
    {.key = "maxRunningRequests",
     .bind = bind<&UtilizationDetectorOptions::maxRunningRequests>(),
     .use = FieldUse::kCommon,
     .meaning = "the slot count per endpoint for the slot term (vLLM's `--max-num-seqs`), so a "
                "server full of short requests reads saturated; 0 = no slot term, unless the "
                "ledger learns it from scrapes",
     .checks = {must("[0, inf]", "is negative; expected an integer >= 0 (0 = no slot term)")}},
    {.key = "endpointCapacity",
     .bind = bind<&UtilizationDetectorOptions::endpointCapacity>(),
     .meaning = "the slot term for every endpoint whose slot count the host knows (configured, "
                "or learned by the dispatch ledger from scrapes), also without "
                "maxRunningRequests; an endpoint of unknown slots scores by queue and KV"},
    {.key = "telemetryValidation",
     .bind = bind<&UtilizationDetectorOptions::telemetryValidation>(),
     .choices = choices<TelemetryValidation>({{"strict", TelemetryValidation::kStrict},
                                              {"reference", TelemetryValidation::kReference}}),
     .deprecated = detail::kReferenceProfileSets},
    {.key = "endpointScoreCap",
     .bind = bind<&UtilizationDetectorOptions::endpointScoreCap>(),
     .checks = {must("(0, inf]", "is not strictly positive; expected a number > 0 or \"none\""),
                warnUnless("[1, inf]", "is below 1.0: the pool can never read saturated")},
     .kind = FieldKind::kStructured,
     .deprecated = detail::kReferenceProfileSets},
    {.key = "kvStartPastThreshold",
     .bind = bind<&UtilizationDetectorOptions::kvStartPastThreshold>(),
     .deprecated = "remove it; off when flowControl.dispatchLedger.replicas > 1 (replicas "
                   "without replica sync), else on",
     .checkedBefore = "telemetryValidation"},  // warned about first, as before the table
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
