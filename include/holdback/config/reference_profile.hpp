// The reference profile: one switch that gives the Go endpoint picker's arithmetic everywhere
// holdback's defaults differ from it (docs/guide/migrating-from-go.md lists each difference).
//
//   flowControl:
//     profile: reference        # default "holdback"
//
// With "reference", every utilization-detector of the file (declared, or the default one the
// loader adds) is built from UtilizationDetector::referenceOptions() instead of the defaults:
//   telemetryValidation  reference   (KV usage above 1 scores as given, as Go)
//   endpointScoreCap     none        (an overloaded endpoint counts with its full score: Go's
//                                     detector vectors 2.0 / 1.6 / 2.03, holdback's 1.0 / 0.6 /
//                                     1.0 under the default cap of 1.0)
// and, when the file's detector is a utilization-detector, the host's dispatch ledger
// (ConfigBundle::dispatchLedger) gets
//   dispatchLedger.correction false  (the scraped figures as they are; Go has no ledger)
// A parameter the file sets explicitly keeps its value (the profile changes defaults, it never
// overrides what is written). Everything else already computes what Go computes by default:
// the policies' ceilings (bit-identical), the concurrency detector, the slot term (off unless
// maxRunningRequests is set), the band and TTL defaults and the provisioned priority domain.
// The flow controller's deliberate behaviour differences (deterministic ties, bounded labels)
// are not arithmetic and stay.
//
// Thread safety: thread-safe (functions of their arguments).
#pragma once

#include "holdback/abi.hpp"

#include <string_view>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

struct ConfigBundle;  // config/endpoint_picker_config.hpp (which includes this header)

inline constexpr std::string_view kHoldbackProfile = "holdback";
inline constexpr std::string_view kReferenceProfile = "reference";

// Rebuilds every utilization detector of `bundle` with the reference defaults for the parameters
// `document` (the whole EndpointPickerConfig) does not set, and points bundle.detector at the
// rebuilt one. Cold path; allocates.
HOLDBACK_API void applyReferenceProfile(ConfigBundle& bundle, const Json& document,
                                        Diagnostics& diagnostics);

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/reference_profile-inl.hpp"
#endif
