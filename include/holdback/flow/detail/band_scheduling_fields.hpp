// The configuration keys of band scheduling (flowControl.bandScheduling): one row per key
// (core/field_table.hpp). validateBandScheduling() checks the rows; the whole-file loader reads
// them, and the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after flow/band_scheduling.hpp (its -inl.hpp and the config layer include it).
// Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/flow/band_scheduling.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

inline constexpr std::array<Field<BandSchedulingOptions>, 2> kBandSchedulingFields = {{
    {.key = "schedule",
     .bind = bind<&BandSchedulingOptions::schedule>(),
     .meaning = "`strict-priority`: the highest non-empty band first; `weighted-fair`: while the "
                "pool is saturated, bands share dispatches by weight (never past a gated band), "
                "so that lower bands are not starved",
     .choices = choices<BandSchedule>({{"strict-priority", BandSchedule::kStrictPriority},
                                       {"weighted-fair", BandSchedule::kWeightedFair}})},
    {.key = "activationThreshold",
     .bind = bind<&BandSchedulingOptions::activationThreshold>(),
     .meaning = "the saturation from which `weighted-fair` shares; below it, strict priority",
     .checks = {must("[0, 1)",
                     "is outside [0, 1); the saturation at and above which "
                     "weighted-fair band scheduling is active")}},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
