// The configuration keys of concurrency-detector, and the rows both built-in detectors share:
// one row per key (core/field_table.hpp). validate() checks the rows; config/detector_config
// reads them, and the effective configuration and docs/reference/configuration.md show them.
//
// Internal: read it after detector/concurrency_detector.hpp (its -inl.hpp and the config layer
// include it). Thread safety: immutable constants.
#pragma once

#include "holdback/abi.hpp"

#include <array>

#include "holdback/core/field_table.hpp"
#include "holdback/detector/concurrency_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

namespace detail {

// headroom, in either detector.
inline constexpr std::string_view kHeadroomMeaning =
    "extra room above saturation 1.0 the endpoint filter still admits, to trade latency for "
    "throughput";
inline constexpr std::array<FieldCheck, 3> kHeadroomChecks = {
    must("(-inf, inf)", "is not finite; expected a number >= 0.0"),
    must("[0, inf]", "is negative; expected a number >= 0.0"),
    warnUnless("[-inf, 1.0]",
               "is above 1.0: the filter lets endpoints exceed their thresholds by more than "
               "100%")};
// A count of requests or tokens (FieldKind::kCount).
inline constexpr std::array<FieldCheck, 3> kPositiveCountChecks = {
    must("(0, inf]", "is not strictly positive; expected an integer > 0")};

}  // namespace detail

inline constexpr std::array<Field<ConcurrencyDetectorOptions>, 5> kConcurrencyDetectorFields = {{
    {.key = "concurrencyMode",
     .bind = bind<&ConcurrencyDetectorOptions::mode>(),
     .use = FieldUse::kCommon,
     .meaning = "count in-flight `requests`, `tokens`, or both (`hybrid`, the worse wins: for "
                "requests of very different sizes)",
     .choices = choices<ConcurrencyMode>({{"requests", ConcurrencyMode::kRequests},
                                          {"tokens", ConcurrencyMode::kTokens},
                                          {"hybrid", ConcurrencyMode::kHybrid}})},
    {.key = "maxConcurrency",
     .bind = bind<&ConcurrencyDetectorOptions::maxConcurrency>(),
     .use = FieldUse::kCommon,
     .meaning = "requests per endpoint at saturation 1.0",
     .checks = detail::kPositiveCountChecks,
     .kind = FieldKind::kCount},
    {.key = "maxTokenConcurrency",
     .bind = bind<&ConcurrencyDetectorOptions::maxTokenConcurrency>(),
     .use = FieldUse::kCommon,
     .meaning = "tokens per endpoint at saturation 1.0 (the KV capacity when known)",
     .checks = detail::kPositiveCountChecks,
     .kind = FieldKind::kCount},
    {.key = "headroom",
     .bind = bind<&ConcurrencyDetectorOptions::headroom>(),
     .meaning = detail::kHeadroomMeaning,
     .checks = detail::kHeadroomChecks},
    {.key = "endpointCapacity",
     .bind = bind<&ConcurrencyDetectorOptions::endpointCapacity>(),
     .meaning = "mixed pools: each endpoint's own slots and KV tokens "
                "(`Endpoint::maxRunningRequests`, `kvCapacityTokens`, when known) replace "
                "`maxConcurrency` / `maxTokenConcurrency` for it"},
}};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
