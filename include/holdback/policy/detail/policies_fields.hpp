// The configuration keys of static-usage-limit-policy and priority-holdback-policy: one row per
// key (core/field_table.hpp). validate() checks the rows; config/policy_config reads them, and
// the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after policy/policies.hpp (its -inl.hpp and the config layer include it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

inline constexpr std::array<Field<StaticUsageLimitOptions>, 1> kStaticUsageLimitFields = {{
    {.key = "threshold",
     .bind = bind<&StaticUsageLimitOptions::threshold>(),
     .use = FieldUse::kCommon,
     .meaning = "the one ceiling every priority gets (1.0: gate at saturation, as Go's default)",
     .checks = {outside("(0.0, 1.0]")}},
}};

namespace detail {
constexpr bool holdbackSigmoid(const PriorityHoldbackOptions& o) noexcept {
  return o.strategy == HoldbackStrategy::kSigmoidSmoothed;
}
constexpr bool holdbackStatic(const PriorityHoldbackOptions& o) noexcept {
  return o.strategy == HoldbackStrategy::kStatic;
}
constexpr bool holdbackNotStatic(const PriorityHoldbackOptions& o) noexcept {
  return o.strategy != HoldbackStrategy::kStatic;
}
}  // namespace detail

// strategy and sigmoidDomain are read by hand (the Go spelling shape + domain is accepted too),
// ceilings is a priority map; the rows give them their meaning, and the effective configuration
// writes strategy and sigmoidDomain from their bindings.
inline constexpr std::array<Field<PriorityHoldbackOptions>, 8> kPriorityHoldbackFields = {{
    {.key = "strategy",
     .bind = bind<&PriorityHoldbackOptions::strategy>(),
     .use = FieldUse::kCommon,
     .meaning = "how ceilings spread between `minCeiling` (lowest priority) and `maxCeiling` "
                "(highest); the Go spelling `shape` + `domain` is also accepted",
     .kind = FieldKind::kStructured,
     .choices =
         choices<HoldbackStrategy>({{"stepwise-spread", HoldbackStrategy::kStepwiseSpread},
                                    {"linear-proportional", HoldbackStrategy::kLinearProportional},
                                    {"sigmoid-smoothed", HoldbackStrategy::kSigmoidSmoothed},
                                    {"static", HoldbackStrategy::kStatic}})},
    {.key = "minCeiling",
     .bind = bind<&PriorityHoldbackOptions::minCeiling>(),
     .use = FieldUse::kCommon,
     .meaning = "the lowest priority's ceiling: how early the least important traffic is held "
                "back (stepwise, linear, sigmoid)",
     .checks = {outside("[0.0, 1.0)")},
     .when = detail::holdbackNotStatic,
     .alwaysWritten = true},
    {.key = "maxCeiling",
     .bind = bind<&PriorityHoldbackOptions::maxCeiling>(),
     .use = FieldUse::kCommon,
     .meaning = "the highest priority's ceiling",
     .checks = {outside("(0.0, 1.0]")},
     .checkedBefore = "minCeiling"},
    {.key = "sigmoidSteepness",
     .bind = bind<&PriorityHoldbackOptions::sigmoidSteepness>(),
     .meaning = "the sigmoid's slope: steeper holds the priorities below the midpoint back harder "
                "(sigmoid-smoothed)",
     .checks = {outside("(0.0, 100.0]")},
     .when = detail::holdbackSigmoid},
    {.key = "sigmoidMidpoint",
     .bind = bind<&PriorityHoldbackOptions::sigmoidMidpoint>(),
     .meaning = "where the sigmoid is half way, in the domain's [0, 1]: the priority from which "
                "traffic counts as protected (sigmoid-smoothed)",
     .checks = {outside("[0.0, 1.0]")},
     .when = detail::holdbackSigmoid},
    {.key = "sigmoidDomain",
     .bind = bind<&PriorityHoldbackOptions::sigmoidDomain>(),
     .meaning = "`rank` (priorities by rank) or `value` (by numeric value, when the gaps between "
                "priorities mean something) (sigmoid-smoothed)",
     .kind = FieldKind::kStructured,
     .choices =
         choices<SigmoidDomain>({{"rank", SigmoidDomain::kRank}, {"value", SigmoidDomain::kValue}}),
     .when = detail::holdbackSigmoid},
    {.key = "ceilings",
     .use = FieldUse::kCommon,
     .meaning = "priority -> ceiling, non-increasing from the highest priority, for a hand-tuned "
                "table (static)",
     .when = detail::holdbackStatic},
    {.key = "defaultCeiling",
     .bind = bind<&PriorityHoldbackOptions::defaultCeiling>(),
     .meaning = "the ceiling of a priority below every listed one (static)",
     .checks = {outside("[0.0, 1.0]")},
     .when = detail::holdbackStatic},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
