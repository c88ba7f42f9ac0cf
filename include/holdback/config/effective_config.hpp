// The effective configuration of a loaded bundle: what the file asked for after every default
// was applied, as one JSON object an operator (or a tool) can read. `holdback validate --json`
// prints it under "effective".
//
// The shape is stable (schemaVersion 1; EffectiveConfigTest pins it, docs/guide/configuration.md
// documents it); fields are only ever added:
//   schemaVersion         1
//   flowControl           the feature gate (false: the host does not gate)
//   profile               "holdback" or "reference" (config/reference_profile.hpp)
//   enginePriority        "off", "vllm" or "sglang" (flow/engine_priority.hpp)
//   usageLimitPolicy      {"name", "type", "parameters"}
//   saturationDetector    {"name", "type", "parameters"}
//   dispatchLedger        the host's DispatchLedger (flowControl.dispatchLedger):
//                         {"correction", "scrapeMarginRequests", "dispatchBudget",
//                          "budgetQueueDepth", "replicas", "slotCountFromScrapes",
//                          "creditCompletions", "reconcileInFlight"}; before 0.2 it sat in the
//                          utilization detector's parameters (the one move of the shape)
//   maxRequests, maxBytes global limits, 0 = unlimited
//   defaultRequestTTL, noEndpointRequestTTL   Go duration strings ("60s"; "0s" = never expires)
//   enableEviction        as written
//   eviction              {"maxRevocationsPerDecision", "confirmationTimeout",
//                          "confirmationGrace", "waitForReleasesTolerance" (null = off),
//                          "footprintAware", "revokeOnBlock",
//                          "restoreReserve": {"enabled", "epsilon", "leadTime", "burstMemory"},
//                          "filter", "order"} (the plugins' names)
//   fairnessIdLabelLimit  distinct fairness_id label values of the queue gauges (0 = none)
//   bandScheduling        {"schedule" ("strict-priority" or "weighted-fair"),
//                          "activationThreshold"} (flow/band_scheduling.hpp)
//   defaultPriorityBand   {"maxRequests", "maxBytes", "defaultRequestTTL" ("0s" = none),
//                          "fairnessPolicy", "orderingPolicy", "weight" (0 = derived)}
//   defaultNegativePriorityBand   the same, or null (negative priorities use the default band)
//   priorityBands         [{"priority", "maxRequests", "maxBytes", "defaultRequestTTL",
//                           "fairnessPolicy", "orderingPolicy", "weight"}], highest first
// A policy or detector is {"name", "type", "parameters"}; fairness and ordering policies are
// {"type", "parameters"}. "parameters" holds every parameter with its effective value for the
// built-in types, and null for a host's own type (holdback cannot see inside it). Deprecated keys
// (docs/reference/configuration.md lists them) are printed as before: the shape only grows.
//
// Thread safety: thread-safe (a pure function of an immutable bundle).
#pragma once

#include "holdback/abi.hpp"

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/config/json.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

inline constexpr int kEffectiveConfigSchemaVersion = 1;

// Keys in the documented order (insertion order), so the output reads like the doc.
using OrderedJson = nlohmann::ordered_json;

[[nodiscard]] HOLDBACK_API OrderedJson effectiveConfig(const ConfigBundle& bundle);

// The effective parameters of one plugin (null for a type holdback does not know).
[[nodiscard]] HOLDBACK_API OrderedJson effectiveParameters(const UsageLimitPolicy& policy);
[[nodiscard]] HOLDBACK_API OrderedJson effectiveParameters(const SaturationDetector& detector);
[[nodiscard]] HOLDBACK_API OrderedJson effectiveParameters(const FairnessPolicy& policy);
[[nodiscard]] HOLDBACK_API OrderedJson effectiveParameters(const OrderingPolicy& policy);

// Every ported section's field table (core/field_table.hpp), for tools and the generated
// reference: {"schemaVersion": 1, "sections": [{"section": "reservation-holdback-policy",
// "fields": [{"key", "kind", "use" ("common" | "advanced"), "default", "choices", "checks"
// [{"interval", "severity", "message"}], "meaning", "deprecated"}]}]} (absent members: not
// applicable). `holdback validate --schema` prints it.
[[nodiscard]] HOLDBACK_API OrderedJson configSchema();

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/effective_config-inl.hpp"
#endif
