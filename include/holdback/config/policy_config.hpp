// JSON configuration of usage limit policies.
//
// Parameters (strict: unknown keys, duplicate keys, wrong types, out-of-range values and keys
// that do not apply to the chosen strategy are all errors, reported together):
//
//   static-usage-limit-policy       threshold (default 1.0, in (0, 1])
//   priority-holdback-policy        either strategy = stepwise-spread | linear-proportional |
//                                   sigmoid-smoothed | static (+ sigmoidDomain = rank | value),
//                                   or shape = linear | sigmoid with domain = rank | value |
//                                   explicit (never both spellings); minCeiling, maxCeiling,
//                                   sigmoidSteepness, sigmoidMidpoint, ceilings, defaultCeiling
//   soft-reflective-ceiling-policy  no parameters
//
// See docs/guide/configuration.md for the full reference.
#pragma once

#include "holdback/abi.hpp"

#include <memory>
#include <optional>
#include <string>

#include "holdback/config/json.hpp"
#include "holdback/config/plugin.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

using PolicyRegistry = PluginRegistry<UsageLimitPolicy>;

// A registry holding the three built-in policy types.
HOLDBACK_API PolicyRegistry builtinPolicyRegistry();

// Parameter parsers; `parameters` may be null (absent), `path` is its JSON pointer.
HOLDBACK_API std::optional<StaticUsageLimitOptions> parseStaticUsageLimitOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics);
// reservation-holdback-policy: epsilon, minCeiling, minReserve, minReserveShare, riseTime,
// decayTime, riseSignificance, poissonSizing, capacityModel ("pooled" | "endpoints")
// (policy/reservation.hpp). Deprecated, still read and applied with a warning each (ParamReader::
// deprecated): epsilons {priority: epsilon}, maxCeiling, refillHorizon, requestUnit, holdReserve,
// protectiveStart, sizing ("refill" | "occupancy"), feedback {enabled, targetWait, targets
// {priority: wait}, increase, decrease, maxExtra, interval}. The whole-file loader derives
// holdReserve and protectiveStart from reserve restoration (config/detail/derived_defaults.hpp).
HOLDBACK_API std::optional<ReservationOptions> parseReservationOptions(const Json* parameters,
                                                                       const std::string& path,
                                                                       Diagnostics& diagnostics);

HOLDBACK_API std::optional<PriorityHoldbackOptions> parsePriorityHoldbackOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics);

// Builds the usage limit policy a document describes. The document is either one plugin object
// ({"type": ..., "name": ..., "parameters": ...}) or an EndpointPickerConfig, in which case every
// plugin whose type is a registered policy type is validated, and the one named by
// flowControl.usageLimitPolicyPluginRef is returned (absent ref: the plugin named
// "static-usage-limit-policy" if there is one, else a static policy with threshold 1.0).
// Plugins of other types are not checked here and produce one warning each.
// The usage-limit-policy slot: ref /flowControl/usageLimitPolicyPluginRef, default
// static-usage-limit-policy.
[[nodiscard]] HOLDBACK_API PluginSlot<UsageLimitPolicy> usageLimitPolicySlot();

HOLDBACK_API Result<std::shared_ptr<UsageLimitPolicy>> loadUsageLimitPolicy(
    const Json& document, const PolicyRegistry& registry);

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/policy_config-inl.hpp"
#endif
