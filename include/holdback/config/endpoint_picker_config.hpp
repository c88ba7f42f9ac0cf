// The whole-file loader: one EndpointPickerConfig (JSON or YAML) -> one immutable, validated
// bundle holding the usage limit policy, the saturation detector and the FlowController options.
//
// What is read (field names and defaults of the Go EndpointPickerConfig of llm-d-router,
// https://github.com/llm-d/llm-d-router: apix/config/v1alpha1/endpointpickerconfig_types.go and
// pkg/epp/config/loader/; docs/guide/configuration.md has the full table, checked against
// kEndpointPickerConfigFields by a test):
//   apiVersion    "llm-d.ai/v1alpha1"; the deprecated "inference.networking.x-k8s.io/v1alpha1" is
//                 accepted with a warning; anything else (or missing) is an error
//   kind          "EndpointPickerConfig"
//   featureGates  ["flowControl", "flowControl=true", "flowControl=false"] (booleans
//                 case-insensitive); an unknown gate is an error. Gate off: the flowControl block
//                 is ignored except saturationDetector (a warning lists what was set), and the
//                 bundle says flowControlEnabled = false: the host must not gate.
//   plugins       every plugin is built through the registries below (policy, detector,
//                 fairness, ordering and the host's own types); a plugin of a type no registry
//                 knows is a Go-gateway plugin (scorer, producer, ...) and gets a warning.
//   flowControl   strict: maxBytes, maxRequests (Kubernetes quantities, >= 0, 0 = unlimited),
//                 defaultRequestTTL, noEndpointRequestTTL (Go durations, >= 0, §3.7 resolution),
//                 usageLimitPolicyPluginRef, saturationDetector.pluginRef, enableEviction,
//                 eviction (holdback extension: confirmationGrace (default: derived from the
//                 detector), revokeOnBlock, restoreReserve {enabled, evictionBudget,
//                 evictionBurst, wasteBudget, wasteBurst}; deprecated, still applied
//                 with a warning: maxRevocationsPerDecision, confirmationTimeout,
//                 waitForReleasesTolerance, footprintAware, restoreReserve {epsilon, leadTime,
//                 burstMemory}), defaultPriorityBand, defaultNegativePriorityBand, priorityBands,
//                 dispatchLedger (the host's DispatchLedger, read with the gate off too;
//                 config/dispatch_ledger_config.hpp), routing (the host's EndpointPicker: in-flight
//                 or priority; read with the gate off too). Defaults that follow from the rest of
//                 the file: config/detail/derived_defaults.hpp.
//   metadata, schedulingProfiles, dataLayer, data, requestHandler, parser  (the rest of the Go
//                 schema) accepted and ignored with a warning each, as are the Go gates
//                 haPopulateNonLeaderDatastore, dataLayer, prepareDataPlugins, enableLegacyMetrics.
// Any other top-level key is an error (the Go decoder is strict too). A policy or detector ref
// naming static-usage-limit-policy / utilization-detector that no plugin declares gets that
// default, as the reference's loader adds them itself.
//
// Every problem is reported at once with its JSON path and, for YAML, line and column.
//
// Thread safety: thread-safe (pure functions over immutable inputs; the bundle is immutable).
#pragma once

#include "holdback/abi.hpp"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/detector_config.hpp"
#include "holdback/config/dispatch_ledger_config.hpp"
#include "holdback/config/document.hpp"
#include "holdback/config/flow_plugin_config.hpp"
#include "holdback/config/plugin.hpp"
#include "holdback/config/policy_config.hpp"
#include "holdback/detector/endpoint_picker.hpp"
#include "holdback/flow/engine_priority.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/fairness.hpp"
#include "holdback/flow/flow_controller.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

// The type registries a load uses (the flow plugins' registries: config/flow_plugin_config.hpp).
// Default-constructed: the built-in types; a host adds its own with e.g.
// registries.policies.add("my-policy", factory). A plugin type must be registered in at most one
// registry (a type in two is reported as an error at its plugin).
struct Registries {
  PolicyRegistry policies = builtinPolicyRegistry();
  DetectorRegistry detectors = builtinDetectorRegistry();
  FairnessRegistry fairness = builtinFairnessRegistry();
  OrderingRegistry ordering = builtinOrderingRegistry();
  EvictionFilterRegistry evictionFilters = builtinEvictionFilterRegistry();
  EvictionOrderRegistry evictionOrders = builtinEvictionOrderRegistry();
};

inline constexpr std::string_view kApiVersion = "llm-d.ai/v1alpha1";
inline constexpr std::string_view kDeprecatedApiVersion = "inference.networking.x-k8s.io/v1alpha1";
inline constexpr std::string_view kKind = "EndpointPickerConfig";

// What one file describes. Immutable once loaded; share it as shared_ptr<const ConfigBundle>.
struct ConfigBundle {
  // The flowControl feature gate. False: the host should not put requests through a
  // FlowController (the reference admits everything, detector-only).
  bool flowControlEnabled = false;
  std::shared_ptr<UsageLimitPolicy> policy;
  std::shared_ptr<SaturationDetector> detector;
  // Policy, detector, bands, templates, global limits and TTLs filled in; the host adds
  // endpoints, onOutcome (and optionally clock and runner) before FlowController::create.
  // Every band and template holds explicit fairness and ordering policies (never null). With the
  // gate off these are the defaults (static policy, threshold 1.0).
  FlowControllerOptions controller;
  // flowControl.enableEviction as written (controller.eviction.enabled when the gate is on). The
  // host adds controller.eviction.evict (its actuator) before FlowController::create; the filter
  // and order are the eviction plugins of the file (at most one of each) or the built-ins.
  bool enableEviction = false;
  // Every plugin that was built, by name.
  std::map<std::string, std::shared_ptr<UsageLimitPolicy>, std::less<>> policies;
  std::map<std::string, std::shared_ptr<SaturationDetector>, std::less<>> detectors;
  std::map<std::string, std::shared_ptr<const FairnessPolicy>, std::less<>> fairnessPolicies;
  std::map<std::string, std::shared_ptr<const OrderingPolicy>, std::less<>> orderingPolicies;
  // The warnings of the load (with positions for YAML).
  Diagnostics warnings;
  // flowControl.profile: "holdback" (default) or "reference" (Go's arithmetic: the detectors
  // built by config/reference_profile.hpp).
  std::string profile = "holdback";
  // flowControl.enginePriority: whether the host writes each request's effective priority into
  // the model server's body, and in which direction (flow/engine_priority.hpp). Off by default.
  EnginePriority enginePriority = EnginePriority::kOff;
  // flowControl.routing: how the host's EndpointPicker routes (detector/endpoint_picker.hpp):
  // in-flight (the default) or priority (EndpointPickerOptions::priorityRouting, with the
  // ledger's priorityLevels set to the bands). Read with the feature gate off too.
  Routing routing = Routing::kInFlight;
  // flowControl.dispatchLedger: the options of the host's DispatchLedger, which corrects the
  // scraped telemetry it hands to the detector (detector/dispatch_ledger.hpp;
  // config/dispatch_ledger_config.hpp), whichever detector the file names. budgetQueueDepth
  // defaults to the utilization detector's queueDepthThreshold when the detector is one. Read
  // with the feature gate off too (it configures the host's telemetry, as saturationDetector).
  // The deprecated place, the utilization detector's parameters.dispatchLedger, still loads.
  DispatchLedgerOptions dispatchLedger;
};

using BundleResult = Result<std::shared_ptr<const ConfigBundle>>;

// Builds the bundle. Diagnostics carry line/column when `document` came from YAML.
HOLDBACK_API BundleResult loadEndpointPickerConfig(const Document& document,
                                                   const Registries& registries = Registries{});
// Parses `text` (JSON or YAML by content) and loads it; syntax errors are returned the same way.
HOLDBACK_API BundleResult loadEndpointPickerConfigText(std::string_view text,
                                                       const Registries& registries = Registries{});
// Reads `file`; an unreadable file is an error at path "".
HOLDBACK_API BundleResult loadEndpointPickerConfigFile(const std::string& file,
                                                       const Registries& registries = Registries{});

// True when `json` looks like a whole EndpointPickerConfig rather than one plugin object (an
// object without a "type" key).
[[nodiscard]] HOLDBACK_API bool isEndpointPickerConfig(const Json& json);

// A multi-line, deterministic description of the stack a bundle builds (gate, policy, detector,
// global limits, TTLs, templates, bands), for `holdback validate` and golden tests.
[[nodiscard]] HOLDBACK_API std::string describeBundle(const ConfigBundle& bundle);

// Hot reload: applies a bundle's policy, detector, bands, templates, global limits and TTLs to a
// running controller (FlowController::reconfigure). On failure the controller is untouched and
// the errors are returned.
HOLDBACK_API Diagnostics applyBundle(FlowController& controller, const ConfigBundle& bundle);

// One documented field of the file: the doc table in docs/guide/configuration.md lists exactly
// these (a test compares them), and the loader's known keys are these.
struct FieldInfo {
  std::string_view path;          // "flowControl.maxBytes", "flowControl.priorityBands[].priority"
  std::string_view type;          // "quantity", "duration", "string", ...
  std::string_view defaultValue;  // as written in the doc table
  std::string_view allowed;       // as written in the doc table
};
HOLDBACK_API extern const std::vector<FieldInfo> kEndpointPickerConfigFields;

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/endpoint_picker_config-inl.hpp"
#endif
