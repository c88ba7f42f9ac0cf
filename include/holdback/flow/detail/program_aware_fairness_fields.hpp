// The configuration keys of program-aware-fairness, spelled as upstream (times as numbers of
// seconds): one row per key (core/field_table.hpp). validate() checks the rows; the config layer
// reads them, and the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after flow/plugins/program_aware_fairness.hpp (its -inl.hpp and the config
// layer include it). Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// strategy is a string (validate() checks it by hand, before the rows); the three times are
// Durations read and written as numbers of seconds.
inline constexpr std::array<Field<ProgramAwareFairnessOptions>, 6> kProgramAwareFairnessFields = {{
    {.key = "strategy",
     .meaning = "`las`: least attained service first (the Go reference's only strategy)",
     .kind = FieldKind::kStructured},
    {.key = "lasWeightService",
     .bind = bind<&ProgramAwareFairnessOptions::weightService>(),
     .meaning = "weight of a program's decayed attained service in its score: higher favours "
                "programs that got less",
     .checks = {must("[0, inf)", "must be a finite number >= 0")}},
    {.key = "lasWeightHeadWait",
     .bind = bind<&ProgramAwareFairnessOptions::weightHeadWait>(),
     .meaning = "weight of its oldest request's wait: higher favours programs that waited longer",
     .checks = {must("[0, inf)", "must be a finite number >= 0")}},
    {.key = "lasHalfLifeSeconds",
     .bind = bind<&ProgramAwareFairnessOptions::halfLife>(),
     .meaning = "half-life of attained service, how long a program's past use counts against "
                "it; 0 = no decay",
     .checks = {must("[0, inf)", "must be >= 0 (0 = no decay)", CheckForm::kUnquoted)},
     .kind = FieldKind::kSeconds},
    {.key = "evictionTtlSeconds",
     .bind = bind<&ProgramAwareFairnessOptions::evictionTtl>(),
     .meaning = "a program idle this long is forgotten (bounds the gateway's memory); 0 = never",
     .checks = {must("[0, inf)", "must be >= 0 (0 = never evict)", CheckForm::kUnquoted)},
     .kind = FieldKind::kSeconds},
    {.key = "evictionSweepSeconds",
     .bind = bind<&ProgramAwareFairnessOptions::evictionSweep>(),
     .meaning = "how often idle programs are swept (the Go reference's key; the default suits)",
     .checks = {must("(0, inf)", "must be > 0", CheckForm::kUnquoted)},
     .kind = FieldKind::kSeconds},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
