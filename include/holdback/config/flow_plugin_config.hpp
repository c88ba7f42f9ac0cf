// JSON configuration of the flow controller's plugins: fairness policies, ordering policies, the
// eviction filter and the eviction order.
//
// Parameters (strict: unknown keys, duplicate keys, wrong types and out-of-range values are all
// errors, reported together with their JSON paths):
//
//   global-strict-fairness-policy              no parameters
//   round-robin-fairness-policy                no parameters
//   program-aware-fairness                     strategy, lasWeightService, lasWeightHeadWait,
//                                              lasHalfLifeSeconds, evictionTtlSeconds,
//                                              evictionSweepSeconds (spelled as upstream:
//                                              seconds as numbers, at most 1e9; the ranges of
//                                              ProgramAwareFairnessPolicy::validate)
//   vtc-fairness-policy                        requestCost (0, 1e9], tokenWeight [0, 1e6]
//   fcfs-ordering-policy                       no parameters
//   edf-ordering-policy                        no parameters
//   slo-deadline-ordering-policy               no parameters
//   sheddable-eviction-filter                  no parameters
//   priority-then-time-eviction-order-policy   no parameters
//
// The whole-file loader (config/endpoint_picker_config.hpp) builds these plugins through the
// registries of its Registries and resolves the bands' fairnessPolicyRef / orderingPolicyRef
// and the eviction plugins. See docs/guide/configuration.md for the full reference.
//
// Thread safety: thread-safe (the functions build fresh registries; see config/plugin.hpp for
// PluginRegistry itself).
#pragma once

#include "holdback/abi.hpp"

#include "holdback/config/plugin.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

using FairnessRegistry = PluginRegistry<FairnessPolicy>;
using OrderingRegistry = PluginRegistry<OrderingPolicy>;
using EvictionFilterRegistry = PluginRegistry<EvictionFilter>;
using EvictionOrderRegistry = PluginRegistry<EvictionOrderPolicy>;

// global-strict-fairness-policy and round-robin-fairness-policy (no parameters),
// program-aware-fairness (strategy, lasWeightService, lasWeightHeadWait, lasHalfLifeSeconds,
// evictionTtlSeconds, evictionSweepSeconds).
HOLDBACK_API FairnessRegistry builtinFairnessRegistry();
// fcfs-ordering-policy, edf-ordering-policy and slo-deadline-ordering-policy (no parameters).
HOLDBACK_API OrderingRegistry builtinOrderingRegistry();
// sheddable-eviction-filter and priority-then-time-eviction-order-policy (no parameters).
HOLDBACK_API EvictionFilterRegistry builtinEvictionFilterRegistry();
HOLDBACK_API EvictionOrderRegistry builtinEvictionOrderRegistry();

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/flow_plugin_config-inl.hpp"
#endif
