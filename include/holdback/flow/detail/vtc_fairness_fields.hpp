// The configuration keys of vtc-fairness-policy: one row per key (core/field_table.hpp).
// validate() checks the rows; config/flow_plugin_config reads them, and the effective
// configuration and docs/reference/configuration.md show them.
//
// Internal: read it after flow/plugins/vtc_fairness.hpp (its -inl.hpp and the config layer include
// it). Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

inline constexpr std::array<Field<VtcFairnessOptions>, 2> kVtcFairnessFields = {{
    {.key = "requestCost",
     .bind = bind<&VtcFairnessOptions::requestCost>(),
     .checks = {must("(0, 1000000000]", "is outside (0, 1e9]; the tokens charged per request")},
     .deprecated = "remove it; a request costs 1, and tokenWeight (per KV token) is relative to "
                   "that"},
    {.key = "tokenWeight",
     .bind = bind<&VtcFairnessOptions::tokenWeight>(),
     .use = FieldUse::kCommon,
     .meaning = "virtual service charged per declared KV token of the request (`kvTokens`), "
                "against 1 per request: a tenant of long requests gets fewer of them; 0 = "
                "request-count fairness",
     .checks = {must("[0, 1000000]", "is outside [0, 1e6]; the weight of a declared token")}},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
