// Implementation of holdback/config/reference_profile.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/config/reference_profile.hpp"

#include <memory>
#include <string>
#include <utility>

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The "parameters" object of the plugin named `name` in `document`, or null.
HOLDBACK_INLINE const config::Json* profilePluginParameters(const config::Json& document,
                                                            std::string_view name) {
  const auto plugins = document.find("plugins");
  if (plugins == document.end() || !plugins->is_array()) return nullptr;
  for (const config::Json& p : *plugins) {
    if (!p.is_object()) continue;
    const auto n = p.find("name");
    const auto t = p.find("type");
    const bool named = n != p.end() && n->is_string();
    const std::string plugin_name = named                            ? n->get<std::string>()
                                    : t != p.end() && t->is_string() ? t->get<std::string>()
                                                                     : std::string();
    if (plugin_name != name) continue;
    const auto params = p.find("parameters");
    return params != p.end() && params->is_object() ? &*params : nullptr;
  }
  return nullptr;
}

HOLDBACK_INLINE bool profileSetsKey(const config::Json* object, std::string_view key) {
  return object != nullptr && object->is_object() && object->contains(std::string(key));
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE void applyReferenceProfile(ConfigBundle& bundle, const Json& document,
                                           Diagnostics& diagnostics) {
  const UtilizationDetectorOptions reference = UtilizationDetector::referenceOptions();
  const auto rebuild = [&](const std::shared_ptr<SaturationDetector>& detector)
      -> std::shared_ptr<SaturationDetector> {
    const auto* util = dynamic_cast<const UtilizationDetector*>(detector.get());
    if (util == nullptr) return detector;
    const Json* params = detail::profilePluginParameters(document, util->name());
    UtilizationDetectorOptions o = util->options();
    if (!detail::profileSetsKey(params, "telemetryValidation")) {
      o.telemetryValidation = reference.telemetryValidation;
    }
    if (!detail::profileSetsKey(params, "endpointScoreCap"))
      o.endpointScoreCap = reference.endpointScoreCap;
    auto made = UtilizationDetector::create(o, std::string(util->name()));
    if (!made) {
      for (const Diagnostic& d : made.diagnostics().errors()) diagnostics.add(d);
      return detector;
    }
    return std::shared_ptr<SaturationDetector>(std::move(made).value());
  };
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
  // Go has no dispatch ledger: beside a utilization detector its correction is off unless the
  // file sets it (flowControl.dispatchLedger, or the detector's deprecated block).
  if (dynamic_cast<const UtilizationDetector*>(bundle.detector.get()) != nullptr) {
    const Json* ledger = nullptr;
    if (const auto fc = document.find("flowControl"); fc != document.end() && fc->is_object()) {
      if (const auto b = fc->find("dispatchLedger"); b != fc->end()) ledger = &*b;
    }
    const Json* params = detail::profilePluginParameters(document, bundle.detector->name());
    const Json* old_ledger =
        detail::profileSetsKey(params, "dispatchLedger") ? &params->at("dispatchLedger") : nullptr;
    if (!detail::profileSetsKey(ledger, "correction") &&
        !detail::profileSetsKey(old_ledger, "correction")) {
      bundle.dispatchLedger.correction = false;
    }
  }
  bundle.profile = std::string(kReferenceProfile);
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
