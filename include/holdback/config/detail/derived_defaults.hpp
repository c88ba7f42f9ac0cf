// detail::applyDerivedDefaults: defaults of the whole-file loader that follow from other settings
// of the same file, so that a file does not spell out what the rest of it already says. Internal;
// called by detail::Loader::run (config/detail/loader.hpp) after flowControl is read.
//
// A key the file sets keeps its value (each of these keys is deprecated in files and still
// honoured: ParamReader::deprecated). Without it:
//   eviction.restoreReserve.epsilon   with restoration on, the reservation policy's epsilon
//                                     (restoration restores the reserve the policy sized); else
//                                     0.01
//   reservation-holdback-policy       holdReserve and protectiveStart false when reserve
//                                     restoration is on (enableEviction and
//                                     flowControl.eviction.restoreReserve):
//                                     restoration repairs a reserve a burst took within a
//                                     revocation's lead time, so the policy need not hold it up
//                                     nor start protective (docs/guide/eviction.md, "Restoration
//                                     replaces the hold"); else true, as before
//   utilization-detector              kvStartPastThreshold false when dispatchLedger.replicas > 1
//                                     (gateway replicas without replica sync cannot take turns
//                                     past the KV threshold: a request must fit below it whole,
//                                     as the simulator's unshared replicas run); else true
// The C++ options (ReservationOptions, EvictionOptions) keep their own defaults: the derivation is
// the file's, and the simulator, which builds its arms from the options, sets each explicitly.
//
// Thread safety: thread-hostile (it rewrites the bundle being loaded). Cold path; allocates.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "holdback/config/detail/document_lookup.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Puts the plugin `made` (the current one rebuilt with other options) in place of `current`
// everywhere the bundle holds it: its map of plugins by name, and the controller's options. The
// options differ from valid ones in booleans only, so `made` fails only on a broken invariant
// (the bundle then keeps the plugin as loaded).
template <class Made, class Interface, class Held>
void derivedReplace(Result<std::unique_ptr<Made>> made,
                    std::map<std::string, std::shared_ptr<Interface>, std::less<>>& byName,
                    std::shared_ptr<Interface>& current, std::shared_ptr<Held>& controller) {
  if (!made) return;
  const std::shared_ptr<Interface> rebuilt(std::move(made).value());
  for (auto& [name, plugin] : byName) {
    if (plugin == current) plugin = rebuilt;
  }
  if (controller == current) controller = rebuilt;
  current = rebuilt;
}

// kvStartPastThreshold false for a utilization detector when dispatchLedger.replicas > 1.
inline void deriveDetectorDefaults(config::ConfigBundle& bundle, const config::Json& document) {
  const auto* util = dynamic_cast<const UtilizationDetector*>(bundle.detector.get());
  if (util == nullptr || bundle.dispatchLedger.replicas <= 1 ||
      !util->options().kvStartPastThreshold) {
    return;
  }
  const config::Json* params = documentPluginParameters(document, util->name());
  if (documentSetsKey(params, "kvStartPastThreshold")) return;
  UtilizationDetectorOptions options = util->options();
  options.kvStartPastThreshold = false;
  derivedReplace(UtilizationDetector::create(std::move(options), std::string(util->name())),
                 bundle.detectors, bundle.detector, bundle.controller.detector);
}

// The restoration epsilon, holdReserve and protectiveStart (reservation-holdback-policy).
inline void derivePolicyDefaults(config::ConfigBundle& bundle, const config::Json& document) {
  const auto* policy = dynamic_cast<const ReservationPolicy*>(bundle.policy.get());
  ReserveRestoreOptions& restore = bundle.controller.eviction.restoreReserve;
  if (policy == nullptr || !bundle.controller.eviction.enabled || !restore.enabled) return;
  if (documentFind(&document, {"flowControl", "eviction", "restoreReserve", "epsilon"}) ==
      nullptr) {
    restore.epsilon = policy->options().epsilon;
  }
  const config::Json* params = documentPluginParameters(document, policy->name());
  ReservationOptions options = policy->options();
  bool changed = false;
  for (auto [key, value] : {std::pair{"holdReserve", &options.holdReserve},
                            std::pair{"protectiveStart", &options.protectiveStart}}) {
    if (!documentSetsKey(params, key) && *value) {
      *value = false;
      changed = true;
    }
  }
  if (!changed) return;
  derivedReplace(ReservationPolicy::create(std::move(options), std::string(policy->name())),
                 bundle.policies, bundle.policy, bundle.controller.policy);
}

inline void applyDerivedDefaults(config::ConfigBundle& bundle, const config::Json& document) {
  if (!bundle.flowControlEnabled) return;
  deriveDetectorDefaults(bundle, document);
  derivePolicyDefaults(bundle, document);
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
