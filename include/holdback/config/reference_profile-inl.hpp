// Implementation of holdback/config/reference_profile.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/config/reference_profile.hpp"

#include <memory>
#include <string>
#include <utility>

#include "holdback/config/detail/document_lookup.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

HOLDBACK_INLINE void applyReferenceProfile(ConfigBundle& bundle, const Json& document,
                                           Diagnostics& diagnostics) {
  const UtilizationDetectorOptions reference = UtilizationDetector::referenceOptions();
  const auto rebuild = [&](const std::shared_ptr<SaturationDetector>& detector)
      -> std::shared_ptr<SaturationDetector> {
    const auto* util = dynamic_cast<const UtilizationDetector*>(detector.get());
    if (util == nullptr) return detector;
    const Json* params = detail::documentPluginParameters(document, util->name());
    UtilizationDetectorOptions o = util->options();
    if (!detail::documentSetsKey(params, "telemetryValidation")) {
      o.telemetryValidation = reference.telemetryValidation;
    }
    if (!detail::documentSetsKey(params, "endpointScoreCap"))
      o.endpointScoreCap = reference.endpointScoreCap;
    auto made = UtilizationDetector::create(o, std::string(util->name()));
    if (!made) {
      for (const Diagnostic& d : made.diagnostics().errors()) diagnostics.add(d);
      return detector;
    }
    return std::shared_ptr<SaturationDetector>(std::move(made).value());
  };
  const std::shared_ptr<SaturationDetector> loaded = bundle.detector;
  bool current_rebuilt = false;
  for (auto& [name, detector] : bundle.detectors) {
    const bool is_current = detector == bundle.detector;
    detector = rebuild(detector);
    if (is_current) {
      bundle.detector = detector;
      current_rebuilt = true;
    }
  }
  // The loader's default detector (no plugin of the file).
  if (bundle.detector && !current_rebuilt) bundle.detector = rebuild(bundle.detector);
  // The controller's options hold the detector the flow controller runs: the rebuilt one.
  if (bundle.controller.detector == loaded) bundle.controller.detector = bundle.detector;
  // Go has no dispatch ledger: beside a utilization detector its correction is off unless the
  // file sets it (flowControl.dispatchLedger, or the detector's deprecated block).
  if (dynamic_cast<const UtilizationDetector*>(bundle.detector.get()) != nullptr) {
    const Json* ledger = detail::documentFind(&document, {"flowControl", "dispatchLedger"});
    const Json* old_ledger = detail::documentFind(
        detail::documentPluginParameters(document, bundle.detector->name()), {"dispatchLedger"});
    if (!detail::documentSetsKey(ledger, "correction") &&
        !detail::documentSetsKey(old_ledger, "correction")) {
      bundle.dispatchLedger.correction = false;
    }
  }
  bundle.profile = std::string(kReferenceProfile);
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
