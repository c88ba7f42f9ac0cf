// Implementation of holdback/config/endpoint_picker_config.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/endpoint_picker_config.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "holdback/config/detail/loader-inl.hpp"
#include "holdback/core/duration.hpp"
#include "holdback/flow/options.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

HOLDBACK_INLINE const std::vector<FieldInfo> kEndpointPickerConfigFields = {
    {"apiVersion", "string", "required",
     "llm-d.ai/v1alpha1 (inference.networking.x-k8s.io/v1alpha1 warns)"},
    {"kind", "string", "required", "EndpointPickerConfig"},
    {"featureGates", "list of strings", "[]",
     "flowControl, flowControl=true, flowControl=false; the Go gates haPopulateNonLeaderDatastore, "
     "dataLayer, prepareDataPlugins, enableLegacyMetrics warn"},
    {"plugins", "list of plugins", "[]", "type, name (default: type), parameters"},
    {"flowControl.maxBytes", "quantity", "0 (unlimited)", ">= 0"},
    {"flowControl.maxRequests", "quantity", "0 (unlimited)", ">= 0"},
    {"flowControl.defaultRequestTTL", "duration", "60s", ">= 0 (0 = never expires)"},
    {"flowControl.noEndpointRequestTTL", "duration", "defaultRequestTTL",
     ">= 0 (0 = never expires)"},
    {"flowControl.usageLimitPolicyPluginRef", "string", "static-usage-limit-policy",
     "a usage limit policy plugin name"},
    {"flowControl.saturationDetector.pluginRef", "string", "utilization-detector",
     "a saturation detector plugin name"},
    {"flowControl.enableEviction", "boolean", "false",
     "in-flight eviction (docs/guide/eviction.md); the host supplies the evict callback"},
    {"flowControl.eviction.maxRevocationsPerDecision", "integer", "2",
     "deprecated (honoured); 1 to 32"},
    {"flowControl.eviction.confirmationTimeout", "duration", "10s", "deprecated (honoured); > 0"},
    {"flowControl.eviction.confirmationGrace", "duration", "from the detector (10ms / 500ms)",
     ">= 0"},
    {"flowControl.eviction.waitForReleasesTolerance", "duration", "unset (wait-vs-evict off)",
     "deprecated (honoured); > 0; sets wait-vs-evict on"},
    {"flowControl.eviction.footprintAware", "boolean", "false",
     "deprecated (honoured); footprint-aware victims"},
    {"flowControl.eviction.revokeOnBlock", "boolean", "true",
     "upstream's head-of-line trigger; false needs restoreReserve"},
    {"flowControl.eviction.restoreReserve.enabled", "boolean",
     "false; true when the restoreReserve block is given",
     "reserve restoration (docs/guide/eviction.md); false keeps it off"},
    {"flowControl.eviction.restoreReserve.epsilon", "number",
     "the reservation policy's epsilon, else 0.01", "deprecated (honoured); (0, 0.5]"},
    {"flowControl.eviction.restoreReserve.leadTime", "duration",
     "0s (measured: confirmation latency + grace)", "deprecated (honoured); >= 0"},
    {"flowControl.eviction.restoreReserve.burstMemory", "duration", "0s (off)",
     "deprecated (honoured); >= 0; time constant of the remembered peak arrival rate"},
    {"flowControl.eviction.restoreReserve.evictionBudget", "number", "0 (no budget)",
     "[0, 1]; revocations by restoration per protected request started"},
    {"flowControl.eviction.restoreReserve.evictionBurst", "number", "4",
     "[1, 1000]; revocations the eviction budget saves up"},
    {"flowControl.eviction.restoreReserve.wasteBudget", "number", "0 (no budget)",
     "[0, 1); revoked slot time as a share of the sheddable bands' completed slot time"},
    {"flowControl.eviction.restoreReserve.wasteBurst", "duration", "30s",
     "> 0; slot time the waste budget saves up"},
    {"flowControl.fairnessIdLabelLimit", "integer", "1000",
     "0 to 1000000; distinct fairness_id values of the queue gauges, the rest in \"other\" "
     "(0 = no per-flow gauges)"},
    {"flowControl.profile", "string", "holdback",
     "\"holdback\" or \"reference\" (Go's arithmetic in every utilization-detector)"},
    {"flowControl.enginePriority", "string", "off",
     "off, vllm (lower first: the sign flips) or sglang (higher first): the effective priority "
     "in the model server's request body"},
    {"flowControl.routing", "string", "in-flight",
     "in-flight or priority (first the fewest requests in flight of the request's priority or "
     "above; servers that preempt by priority)"},
    {"flowControl.bandScheduling.schedule", "string", "strict-priority",
     "strict-priority or weighted-fair (saturation-activated WFQ across bands)"},
    {"flowControl.bandScheduling.activationThreshold", "number", "0.8",
     "[0, 1); weighted-fair is active while the saturation is at least this"},
    {"flowControl.dispatchLedger.correction", "boolean", "true",
     "correct scraped telemetry with the dispatches the scrape cannot have seen (the host's "
     "DispatchLedger)"},
    {"flowControl.dispatchLedger.scrapeMarginRequests", "integer", "0",
     "deprecated (honoured); >= 0"},
    {"flowControl.dispatchLedger.dispatchBudget", "boolean", "false", "per-scrape dispatch budget"},
    {"flowControl.dispatchLedger.budgetQueueDepth", "integer",
     "the utilization detector's queueDepthThreshold, else 5", "deprecated (honoured); > 0"},
    {"flowControl.dispatchLedger.replicas", "integer", "1",
     "1 to 1024; gateway replicas sharing the pool, each with its own ledger"},
    {"flowControl.dispatchLedger.slotCountFromScrapes", "boolean", "true",
     "deprecated (honoured); without maxRunningRequests, the largest running figure scraped is the "
     "slot count"},
    {"flowControl.dispatchLedger.creditCompletions", "boolean", "false",
     "deprecated (honoured); completions of requests the scrape still showed lower its figures at "
     "once"},
    {"flowControl.dispatchLedger.reconcileInFlight", "boolean", "true",
     "deprecated (honoured); requests in flight at the baseline that the scrape does not show stay "
     "pending"},
    {"flowControl.defaultPriorityBand", "band", "all defaults", "band fields; priority ignored"},
    {"flowControl.defaultNegativePriorityBand", "band", "defaultPriorityBand",
     "band fields; priority ignored"},
    {"flowControl.priorityBands", "list of bands", "[] (band 0 from the template)",
     "unique priorities"},
    {"band.priority", "integer", "required in priorityBands", "int32"},
    {"band.maxBytes", "quantity", "1000000000 (0 = default)", ">= 0"},
    {"band.maxRequests", "quantity", "5000 (0 = default)", ">= 0"},
    {"band.defaultRequestTTL", "duration", "0s (none: the global defaultRequestTTL)",
     ">= 0; the smallest set TTL of request, band and global wins"},
    {"band.fairnessPolicyRef", "string", "global-strict-fairness-policy",
     "a fairness policy plugin name"},
    {"band.orderingPolicyRef", "string", "fcfs-ordering-policy", "an ordering policy plugin name"},
    {"band.weight", "number", "0 (derived: the lowest band 1, the next 2, ...)",
     "0 or [1, 1000000]; the band's share under weighted-fair band scheduling"},
};

// The reference table above spells the flow controller's defaults (flow/options.hpp) as text.
static_assert(kDefaultRequestTtl == std::chrono::seconds(60), "update the defaultRequestTTL row");
static_assert(kDefaultBandActivationThreshold == 0.8, "update the activationThreshold row");
static_assert(kDefaultBandMaxRequests == 5000, "update the band.maxRequests row");
static_assert(kDefaultBandMaxBytes == 1'000'000'000, "update the band.maxBytes row");
static_assert(kDefaultFairnessIdLabelLimit == 1000, "update the fairnessIdLabelLimit row");

HOLDBACK_INLINE bool isEndpointPickerConfig(const Json& json) {
  return json.is_object() && !json.contains("type");
}

HOLDBACK_INLINE BundleResult loadEndpointPickerConfig(const Document& document,
                                                      const Registries& registries) {
  auto bundle = std::make_shared<ConfigBundle>();
  Diagnostics diagnostics;
  detail::Loader(document.json, registries, *bundle, diagnostics).run();
  diagnostics = withPositions(diagnostics, document.positions);
  if (diagnostics.hasErrors() || !bundle->policy || !bundle->detector) {
    if (!diagnostics.hasErrors()) diagnostics.error("", "the configuration could not be built");
    return BundleResult::failure(std::move(diagnostics));
  }
  for (const Diagnostic& w : diagnostics.warnings()) bundle->warnings.add(w);
  return BundleResult(std::shared_ptr<const ConfigBundle>(std::move(bundle)),
                      std::move(diagnostics));
}

HOLDBACK_INLINE BundleResult loadEndpointPickerConfigText(std::string_view text,
                                                          const Registries& registries) {
  auto parsed = parseDocument(text);
  if (!parsed || parsed.diagnostics().hasErrors()) {
    Diagnostics diagnostics = parsed.diagnostics();
    if (parsed) {  // duplicate keys: report them with everything else
      auto loaded = loadEndpointPickerConfig(parsed.value(), registries);
      diagnostics.append(loaded.diagnostics());
    }
    return BundleResult::failure(std::move(diagnostics));
  }
  auto loaded = loadEndpointPickerConfig(parsed.value(), registries);
  if (parsed.diagnostics().empty()) return loaded;
  Diagnostics diagnostics = parsed.diagnostics();
  diagnostics.append(loaded.diagnostics());
  if (!loaded) return BundleResult::failure(std::move(diagnostics));
  return BundleResult(std::move(loaded).value(), std::move(diagnostics));
}

HOLDBACK_INLINE BundleResult loadEndpointPickerConfigFile(const std::string& file,
                                                          const Registries& registries) {
  const auto text = readTextFile(file);
  if (!text) {
    Diagnostics diagnostics;
    diagnostics.error("", "cannot read " + file);
    return BundleResult::failure(std::move(diagnostics));
  }
  return loadEndpointPickerConfigText(*text, registries);
}

}  // namespace config

namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

HOLDBACK_INLINE std::string describeBand(std::uint64_t max_requests, std::uint64_t max_bytes,
                                         const std::shared_ptr<const FairnessPolicy>& fairness,
                                         const std::shared_ptr<const OrderingPolicy>& ordering) {
  return "maxRequests " + std::to_string(max_requests) + ", maxBytes " + std::to_string(max_bytes) +
         ", " + std::string(fairness ? fairness->type() : GlobalStrictFairnessPolicy::kType) +
         ", " + std::string(ordering ? ordering->type() : FcfsOrderingPolicy::kType);
}

HOLDBACK_INLINE std::string limit(std::uint64_t value) {
  return value == 0 ? std::string("unlimited") : std::to_string(value);
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE std::string describeBundle(const ConfigBundle& bundle) {
  const FlowControllerOptions& o = bundle.controller;
  std::string out;
  out +=
      std::string("flow control: ") + (bundle.flowControlEnabled ? "on" : "off (no gating)") + "\n";
  out += "usage limit policy: \"" + std::string(bundle.policy->name()) + "\" (type " +
         std::string(bundle.policy->type()) + ")\n";
  out += "saturation detector: \"" + std::string(bundle.detector->name()) + "\" (type " +
         std::string(bundle.detector->type()) + ")\n";
  out += "global: maxRequests " + detail::limit(o.maxRequests) + ", maxBytes " +
         detail::limit(o.maxBytes) + "\n";
  const Duration ttl = o.defaultRequestTtl.value_or(kDefaultRequestTtl);
  out += "defaultRequestTTL " + formatDuration(ttl) + ", noEndpointRequestTTL " +
         formatDuration(o.noEndpointRequestTtl.value_or(ttl)) + "\n";
  out += "default band: " +
         detail::describeBand(o.defaultBand.maxRequests, o.defaultBand.maxBytes,
                              o.defaultBand.fairness, o.defaultBand.ordering) +
         "\n";
  if (o.defaultNegativeBand) {
    const BandTemplate& t = *o.defaultNegativeBand;
    out += "default negative band: " +
           detail::describeBand(t.maxRequests, t.maxBytes, t.fairness, t.ordering) + "\n";
  }
  std::vector<BandOptions> bands = o.bands;
  std::sort(bands.begin(), bands.end(),
            [](const BandOptions& a, const BandOptions& b) { return a.priority > b.priority; });
  for (const BandOptions& b : bands) {
    out += "band " + std::to_string(b.priority) + ": " +
           detail::describeBand(b.maxRequests, b.maxBytes, b.fairness, b.ordering) + "\n";
  }
  if (o.bandScheduling.schedule == BandSchedule::kWeightedFair) {
    out += "band scheduling: weighted-fair at saturation >= " +
           formatNumber(o.bandScheduling.activationThreshold) + "\n";
  }
  if (o.eviction.enabled) {
    const EvictionOptions& e = o.eviction;
    out += "eviction: " + std::string(e.filter ? e.filter->name() : kSheddableEvictionFilterType) +
           ", " + std::string(e.order ? e.order->name() : kPriorityThenTimeEvictionOrderType) +
           ", at most " + std::to_string(e.maxRevocationsPerDecision) + " per decision, grace " +
           formatDuration(e.confirmationGrace) + ", timeout " +
           formatDuration(e.confirmationTimeout) +
           (e.waitForReleases.enabled
                ? ", wait for releases within " + formatDuration(e.waitForReleases.tolerance)
                : std::string()) +
           (e.footprintAware ? ", footprint-aware" : "") +
           (e.revokeOnBlock ? std::string() : ", no head-of-line trigger") +
           (e.restoreReserve.enabled
                ? ", restore the reserve (epsilon " + formatNumber(e.restoreReserve.epsilon) +
                      ", lead time " +
                      (e.restoreReserve.leadTime > Duration::zero()
                           ? formatDuration(e.restoreReserve.leadTime)
                           : std::string("measured")) +
                      (e.restoreReserve.burstMemory > Duration::zero()
                           ? ", burst memory " + formatDuration(e.restoreReserve.burstMemory)
                           : std::string()) +
                      (e.restoreReserve.burstSignificance > 0.0
                           ? ", only in a protected burst (significance " +
                                 formatNumber(e.restoreReserve.burstSignificance) + ")"
                           : std::string()) +
                      (e.restoreReserve.evictionBudget > 0.0
                           ? ", at most " + formatNumber(e.restoreReserve.evictionBudget) +
                                 " revocations per protected request (burst " +
                                 formatNumber(e.restoreReserve.evictionBurst) + ")"
                           : std::string()) +
                      (e.restoreReserve.wasteBudget > 0.0
                           ? ", at most " + formatNumber(100.0 * e.restoreReserve.wasteBudget) +
                                 " % of sheddable slot time wasted (burst " +
                                 formatDuration(e.restoreReserve.wasteBurst) + ")"
                           : std::string()) +
                      ")"
                : std::string()) +
           "\n";
  }
  return out;
}

HOLDBACK_INLINE Diagnostics applyBundle(FlowController& controller, const ConfigBundle& bundle) {
  return controller.reconfigure(bundle.controller);
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback