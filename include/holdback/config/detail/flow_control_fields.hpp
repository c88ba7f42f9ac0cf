// The keys of the flowControl block: one row per key (core/field_table.hpp), in the order the
// effective configuration writes them (readBefore: the order the loader reads them in). The scalars
// are bound to the bundle; the blocks (the plugin refs, dispatchLedger, eviction, bandScheduling,
// the bands) are read and written by hand at their row, with their own tables
// (flow/detail/band_fields.hpp, ...). The whole-file loader reads the detector first (the ledger
// and eviction derive from it), and docs/reference/configuration.md takes the meaning and use of
// the scalars from here.
//
// Internal: read it after config/endpoint_picker_config.hpp (the loader and
// config/effective_config include it). Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstdint>

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/core/field_table.hpp"
#include "holdback/flow/options.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

inline constexpr std::array<Field<config::ConfigBundle>, 17> kFlowControlFields = {{
    {.key = "profile",
     .meaning = "`reference` switches every default to the Go reference's arithmetic (no score "
                "cap, reference telemetry validation, no ledger): set it to reproduce the Go "
                "gateway's decisions while migrating; [migrating from "
                "Go](../guide/migrating-from-go.md)",
     .kind = FieldKind::kStructured,
     .readBefore = "bandScheduling"},
    {.key = "enginePriority",
     .bind = bind<&config::ConfigBundle::enginePriority>(),
     .meaning = "pass the request's effective priority to the model server in the body, so the "
                "engine's own scheduler also serves higher bands first: `vllm` (`priority`, lower "
                "first: the sign flips), `sglang`; `off` sends nothing",
     .choices = choices<EnginePriority>({{"off", EnginePriority::kOff},
                                         {"vllm", EnginePriority::kVllm},
                                         {"sglang", EnginePriority::kSglang}}),
     .readBefore = "bandScheduling"},
    {.key = "routing",
     .bind = bind<&config::ConfigBundle::routing>(),
     .meaning = "how the gateway picks an endpoint: `in-flight`, the fewest requests in flight; "
                "`priority`, first the fewest in flight of the request's priority or above, so "
                "that a batch backlog does not decide where protected requests go (for servers "
                "that preempt by priority; [results](../results/engine-priority.md))",
     .choices =
         choices<Routing>({{"in-flight", Routing::kInFlight}, {"priority", Routing::kPriority}}),
     .readBefore = "bandScheduling"},
    {.key = "usageLimitPolicyPluginRef",
     .kind = FieldKind::kStructured,
     .writtenAs = "usageLimitPolicy",
     .when = [](const config::ConfigBundle& b) { return b.policy != nullptr; }},
    {.key = "saturationDetector",
     .kind = FieldKind::kStructured,
     .when = [](const config::ConfigBundle& b) { return b.detector != nullptr; },
     .readBefore = "usageLimitPolicyPluginRef"},
    {.key = "dispatchLedger",
     .kind = FieldKind::kStructured,
     .readBefore = "usageLimitPolicyPluginRef"},
    {.key = "maxRequests",
     .bind = bind<&config::ConfigBundle::controller, &FlowControllerOptions::maxRequests>(),
     .use = FieldUse::kCommon,
     .meaning = "global cap on queued requests across bands, to bound the gateway's memory; 0 = "
                "unlimited",
     .kind = FieldKind::kQuantity,
     .label = "global MaxRequests"},
    {.key = "maxBytes",
     .bind = bind<&config::ConfigBundle::controller, &FlowControllerOptions::maxBytes>(),
     .meaning = "global cap on queued request bytes, to bound the gateway's memory; 0 = unlimited",
     .kind = FieldKind::kQuantity,
     .label = "global MaxBytes",
     .readBefore = "maxRequests"},
    {.key = "defaultRequestTTL",
     .bind = bind<&config::ConfigBundle::controller, &FlowControllerOptions::defaultRequestTtl>(),
     .use = FieldUse::kCommon,
     .meaning = "how long a request may wait in the queue when neither its band nor its request "
                "sets a shorter TTL (your clients' patience); `0s` = no expiry",
     .kind = FieldKind::kFlowDuration,
     .label = "DefaultRequestTTL",
     .writtenByHand = true},
    {.key = "noEndpointRequestTTL",
     .bind =
         bind<&config::ConfigBundle::controller, &FlowControllerOptions::noEndpointRequestTtl>(),
     .meaning = "how long requests wait while the pool has no usable endpoint (a rollout, a "
                "scale from zero) before they are answered 503",
     .kind = FieldKind::kFlowDuration,
     .label = "NoEndpointRequestTTL",
     .writtenByHand = true},
    {.key = "enableEviction",
     .bind = bind<&config::ConfigBundle::enableEviction>(),
     .use = FieldUse::kCommon,
     .meaning = "turn in-flight eviction on, so that protected requests are not starved by "
                "sheddable ones already running (the host supplies the `evict` callback)"},
    {.key = "eviction", .kind = FieldKind::kStructured},
    {.key = "fairnessIdLabelLimit",
     .bind =
         bind<&config::ConfigBundle::controller, &FlowControllerOptions::fairnessIdLabelLimit>(),
     .meaning = "distinct `fairness_id` label values on the queue gauges (the most queued flows), "
                "to bound your metrics' cardinality; the rest are summed into `\"other\"`; 0 = no "
                "per-flow gauges",
     .min = 0,
     .max = static_cast<std::int64_t>(kMaxFairnessIdLabelLimit),
     .readBefore = "defaultPriorityBand"},
    {.key = "bandScheduling", .kind = FieldKind::kStructured},
    {.key = "defaultPriorityBand", .kind = FieldKind::kStructured},
    {.key = "defaultNegativePriorityBand", .kind = FieldKind::kStructured},
    {.key = "priorityBands", .kind = FieldKind::kStructured},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
