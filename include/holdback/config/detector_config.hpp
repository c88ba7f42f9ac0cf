// JSON configuration of saturation detectors.
//
// Parameters (strict: unknown keys, duplicate keys, wrong types and out-of-range values are all
// errors, reported together with their JSON paths):
//
//   utilization-detector   queueDepthThreshold (int, default 5, > 0), kvCacheUtilThreshold
//                          (default 0.8, in (0, 1]), metricsStalenessThreshold (duration string,
//                          default "200ms", > 0), headroom (default 0.0, >= 0; > 1 warns),
//                          aggregation = mean | max | weighted | capacity, stalenessPolicy =
//                          saturated | ignore, maxRunningRequests (int, default 0 = no slot term,
//                          >= 0), endpointCapacity (bool, default false: the slot term where an
//                          endpoint's slots are known), telemetryValidation = strict (default) |
//                          reference, endpointScoreCap (number > 0 or "none", default 1.0),
//                          kvStartPastThreshold (bool, default true); dispatchLedger
//                          {...} is the deprecated place of flowControl.dispatchLedger
//                          (config/dispatch_ledger_config.hpp): checked, with a warning, and
//                          not part of the detector's options
//   concurrency-detector   concurrencyMode = requests | tokens | hybrid, maxConcurrency (int,
//                          default 100, > 0), maxTokenConcurrency (int, default 1000000, > 0),
//                          headroom (default 0.0, >= 0; > 1 warns), endpointCapacity (bool,
//                          default false), inFlightLoadProducerName
//                          (accepted for compatibility with Go configs; a warning says it has no
//                          effect: the host feeds in-flight counts)
//
// Durations are Go-style strings (core/duration.hpp). See docs/guide/detectors.md.
#pragma once

#include "holdback/abi.hpp"

#include <memory>
#include <optional>
#include <string>

#include "holdback/config/dispatch_ledger_config.hpp"
#include "holdback/config/json.hpp"
#include "holdback/config/plugin.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

using DetectorRegistry = PluginRegistry<SaturationDetector>;

// A registry holding utilization-detector and concurrency-detector.
HOLDBACK_API DetectorRegistry builtinDetectorRegistry();

// Parameter parsers; `parameters` may be null (absent), `path` is its JSON pointer.
HOLDBACK_API std::optional<UtilizationDetectorOptions> parseUtilizationDetectorOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics);
HOLDBACK_API std::optional<ConcurrencyDetectorOptions> parseConcurrencyDetectorOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics);

// The detector ref of an EndpointPickerConfig (an object):
// flowControl.saturationDetector.pluginRef, else the deprecated top-level
// saturationDetector.pluginRef (warned about whenever present). An empty ref is absent. `refPath`
// receives the JSON pointer of the ref used. Unknown keys in either saturationDetector object are
// reported; a flowControl that is not an object is skipped (its reader reports it).
HOLDBACK_API std::optional<std::string> readSaturationDetectorRef(const Json& document,
                                                                  std::string& refPath,
                                                                  Diagnostics& diagnostics);

// Builds the saturation detector a document describes. The document is either one plugin object
// ({"type": ..., "name": ..., "parameters": ...}) or an EndpointPickerConfig, in which case every
// plugin whose type is a registered detector type is validated (plugins of other types are
// skipped silently: they are another loader's business), and the one named by
// flowControl.saturationDetector.pluginRef is returned. The deprecated top-level
// saturationDetector.pluginRef is honoured (with a warning) when the flowControl one is absent.
// Without a ref: the plugin named "utilization-detector" if there is one, else a
// utilization-detector with default options.
// The saturation-detector slot: ref /flowControl/saturationDetector/pluginRef (or the deprecated
// /saturationDetector/pluginRef), default utilization-detector.
[[nodiscard]] HOLDBACK_API PluginSlot<SaturationDetector> saturationDetectorSlot();

HOLDBACK_API Result<std::shared_ptr<SaturationDetector>> loadSaturationDetector(
    const Json& document, const DetectorRegistry& registry);

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/detector_config-inl.hpp"
#endif
