// Implementation of holdback/config/endpoint_picker_config.hpp: compiled into libholdback by
// src/config/endpoint_picker_config.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/endpoint_picker_config.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "holdback/config/duration.hpp"
#include "holdback/config/quantity.hpp"
#include "holdback/flow/options.hpp"
#include "holdback/flow/program_aware_fairness.hpp"
#include "holdback/flow/slo_deadline_ordering.hpp"

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
     "in-flight eviction (docs/eviction.md); the host supplies the evict callback"},
    {"flowControl.eviction.maxRevocationsPerDecision", "integer", "2", "1 to 32"},
    {"flowControl.eviction.confirmationTimeout", "duration", "10s", "> 0"},
    {"flowControl.eviction.confirmationGrace", "duration", "from the detector (10ms / 500ms)",
     ">= 0"},
    {"flowControl.eviction.waitForReleasesTolerance", "duration", "unset (wait-vs-evict off)",
     "> 0; sets wait-vs-evict on"},
    {"flowControl.eviction.footprintAware", "boolean", "false", "footprint-aware victims"},
    {"flowControl.eviction.revokeOnBlock", "boolean", "true",
     "upstream's head-of-line trigger; false needs restoreReserve"},
    {"flowControl.eviction.restoreReserve.enabled", "boolean",
     "false; true when the restoreReserve block is given",
     "reserve restoration (docs/eviction.md); false keeps it off"},
    {"flowControl.eviction.restoreReserve.epsilon", "number", "0.01", "(0, 0.5]"},
    {"flowControl.eviction.restoreReserve.leadTime", "duration",
     "0s (measured: confirmation latency + grace)", ">= 0"},
    {"flowControl.eviction.restoreReserve.burstMemory", "duration", "0s (off)",
     ">= 0; time constant of the remembered peak arrival rate"},
    {"flowControl.fairnessIdLabelLimit", "integer", "1000",
     "0 to 1000000; distinct fairness_id values of the queue gauges, the rest in \"other\" "
     "(0 = no per-flow gauges)"},
    {"flowControl.defaultPriorityBand", "band", "all defaults", "band fields; priority ignored"},
    {"flowControl.defaultNegativePriorityBand", "band", "defaultPriorityBand",
     "band fields; priority ignored"},
    {"flowControl.priorityBands", "list of bands", "[] (band 0 from the template)",
     "unique priorities"},
    {"band.priority", "integer", "required in priorityBands", "int32"},
    {"band.maxBytes", "quantity", "1000000000 (0 = default)", ">= 0"},
    {"band.maxRequests", "quantity", "5000 (0 = default)", ">= 0"},
    {"band.fairnessPolicyRef", "string", "global-strict-fairness-policy",
     "a fairness policy plugin name"},
    {"band.orderingPolicyRef", "string", "fcfs-ordering-policy", "an ordering policy plugin name"},
};

// The reference table above spells the flow controller's defaults (flow/options.hpp) as text.
static_assert(kDefaultRequestTtl == std::chrono::seconds(60), "update the defaultRequestTTL row");
static_assert(kDefaultBandMaxRequests == 5000, "update the band.maxRequests row");
static_assert(kDefaultBandMaxBytes == 1'000'000'000, "update the band.maxBytes row");
static_assert(kDefaultFairnessIdLabelLimit == 1000, "update the fairnessIdLabelLimit row");

}  // namespace config

namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

// The rule for a Go EndpointPickerConfig: every field of the Go schema loads. Flow-control fields
// (flowControl, the deprecated top-level saturationDetector, the flow-control plugins and the
// flowControl gate) are read strictly; the rest of the Go schema is accepted with a warning each.
// Top-level fields of the Go schema that mean nothing to holdback: the scheduler
// (schedulingProfiles), the data layer (dataLayer, and its pre-2026 name data), request handling
// (requestHandler and its deprecated top-level parser); metadata appears in Kubernetes manifests.
inline constexpr std::string_view kIgnoredTopLevel[] = {
    "metadata", "schedulingProfiles", "dataLayer", "data", "requestHandler", "parser"};
// Feature gates the Go gateway registers that do not concern flow control (their values are
// still checked). haPopulateNonLeaderDatastore is on by default upstream; the other three are
// the data-layer gates of earlier releases.
inline constexpr std::string_view kIgnoredFeatureGates[] = {
    "haPopulateNonLeaderDatastore", "dataLayer", "prepareDataPlugins", "enableLegacyMetrics"};

template <class Interface>
std::unique_ptr<Interface> noParameters(const PluginSpec& spec, Diagnostics& diagnostics,
                                        std::unique_ptr<Interface> made) {
  ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
  params.finish();
  return made;
}

// program-aware-fairness parameters, spelled as upstream (seconds as numbers).
HOLDBACK_INLINE std::unique_ptr<FairnessPolicy> parseProgramAwareFairness(
    const PluginSpec& spec, Diagnostics& diagnostics) {
  ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
  ProgramAwareFairnessOptions o;
  const std::size_t before = diagnostics.errorCount();
  if (const auto v = params.string("strategy")) o.strategy = *v;
  if (const auto v = params.number("lasWeightService")) o.weightService = *v;
  if (const auto v = params.number("lasWeightHeadWait")) o.weightHeadWait = *v;
  const auto seconds = [&](std::string_view key, Duration& out) {
    const auto v = params.number(key);
    if (!v) return;
    if (!(*v >= -1e9 && *v <= 1e9)) {
      params.error(key, formatNumber(*v) + " is not a number of seconds in [0, 1e9]");
      return;
    }
    out = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(*v));
  };
  seconds("lasHalfLifeSeconds", o.halfLife);
  seconds("evictionTtlSeconds", o.evictionTtl);
  seconds("evictionSweepSeconds", o.evictionSweep);
  params.finish();
  ProgramAwareFairnessPolicy::validate(o, spec.parametersPath(), diagnostics);
  if (diagnostics.errorCount() > before) return nullptr;
  auto made = ProgramAwareFairnessPolicy::create(std::move(o), spec.name);
  if (!made) return nullptr;
  return std::move(made).value();
}

// A Kubernetes quantity: a string ("1Gi") or a JSON integer. Returns nullopt when absent or
// invalid (reported). `field` names it in the negative-value message, as the reference does.
HOLDBACK_INLINE std::optional<std::uint64_t> readQuantity(ParamReader& reader, std::string_view key,
                                                          const std::string& field) {
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  std::optional<std::int64_t> n;
  if (v->is_string()) {
    n = parseQuantity(v->get<std::string>());
    if (!n) {
      reader.error(key, describe(*v) +
                            " is not a Kubernetes quantity (e.g. \"5000\", \"1k\", \"500M\", "
                            "\"1Gi\")");
      return std::nullopt;
    }
  } else if (v->is_number_integer()) {
    n = v->get<std::int64_t>();
  } else if (v->is_number_unsigned()) {
    reader.error(key, describe(*v) + " does not fit a 64-bit quantity");
    return std::nullopt;
  } else if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d != d || d > 9.2e18 || d < -9.2e18) {
      reader.error(key, describe(*v) + " does not fit a 64-bit quantity");
      return std::nullopt;
    }
    n = parseQuantity(formatNumber(d));
    if (!n) {
      reader.error(key, describe(*v) + " is not a quantity");
      return std::nullopt;
    }
  } else {
    reader.error(key, mismatch(*v, "a quantity string or an integer"));
    return std::nullopt;
  }
  if (*n < 0) {
    reader.error(key, field + " must be non-negative, got " + std::to_string(*n));
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(*n);
}

HOLDBACK_INLINE std::optional<Duration> readDuration(ParamReader& reader, std::string_view key,
                                                     const std::string& field) {
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    reader.error(key, mismatch(*v, "a duration string such as \"30s\""));
    return std::nullopt;
  }
  const auto d = parseDuration(v->get<std::string>());
  if (!d) {
    reader.error(key, describe(*v) +
                          " is not a duration; use Go spellings such as \"250ms\", \"1.5s\", "
                          "\"2m\"");
    return std::nullopt;
  }
  if (*d < Duration::zero()) {
    reader.error(key, field + " cannot be negative, but got " + v->get<std::string>());
    return std::nullopt;
  }
  return d;
}

HOLDBACK_INLINE std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The built plugins of one kind plus how to resolve a ref to one.
template <class Interface>
struct Kind {
  const PluginRegistry<Interface>* registry = nullptr;
  std::string_view name;  // "fairness policy"
  std::map<std::string, std::shared_ptr<Interface>, std::less<>> built;
};

class Loader {
 public:
  Loader(const Json& json, const Registries& registries, ConfigBundle& bundle, Diagnostics& d)
      : json_(json), registries_(registries), bundle_(bundle), d_(d) {}

  void run() {
    if (!json_.is_object()) {
      d_.error("", mismatch(json_, "an EndpointPickerConfig object"));
      return;
    }
    ParamReader top(&json_, "", d_);
    readHeader(top);
    readFeatureGates(top);
    top.accept("plugins");
    buildAllPlugins();
    top.accept("flowControl");
    top.accept("saturationDetector");  // deprecated; read with the detector ref
    for (std::string_view key : kIgnoredTopLevel) {
      top.accept(key);
      if (top.has(key)) d_.warning(top.pathOf(key), "has no meaning in holdback; ignored");
    }
    top.finish();
    readFlowControl();
  }

 private:
  void readHeader(ParamReader& top) {
    const auto api = top.string("apiVersion");
    if (!top.has("apiVersion")) {
      top.error("apiVersion", "missing; expected \"" + std::string(kApiVersion) + "\"");
    } else if (api && *api == kDeprecatedApiVersion) {
      d_.warning("/apiVersion",
                 "\"" + *api + "\" is deprecated; use \"" + std::string(kApiVersion) + "\"");
    } else if (api && *api != kApiVersion) {
      top.error("apiVersion",
                "\"" + *api + "\" is not supported; expected \"" + std::string(kApiVersion) + "\"");
    }
    const auto kind = top.string("kind");
    if (!top.has("kind")) {
      top.error("kind", "missing; expected \"" + std::string(kKind) + "\"");
    } else if (kind && *kind != kKind) {
      top.error("kind", "\"" + *kind + "\" is not \"" + std::string(kKind) + "\"");
    }
  }

  void readFeatureGates(ParamReader& top) {
    const Json* gates = top.value("featureGates");
    if (gates == nullptr || gates->is_null()) return;
    if (!gates->is_array()) {
      top.error("featureGates", mismatch(*gates, "an array of gate strings"));
      return;
    }
    for (std::size_t i = 0; i < gates->size(); ++i) {
      const std::string path = "/featureGates/" + std::to_string(i);
      const Json& g = (*gates)[i];
      if (!g.is_string()) {
        d_.error(path, mismatch(g, "a string such as \"flowControl\""));
        continue;
      }
      std::string text = g.get<std::string>();
      bool value = true;
      if (const auto eq = text.find('='); eq != std::string::npos) {
        const std::string v = lower(text.substr(eq + 1));
        text.resize(eq);
        if (v == "true") {
          value = true;
        } else if (v == "false") {
          value = false;
        } else {
          d_.error(path,
                   "\"" + g.get<std::string>() + "\": the value after '=' must be true or false");
          continue;
        }
      }
      if (text != "flowControl") {
        if (std::find(std::begin(kIgnoredFeatureGates), std::end(kIgnoredFeatureGates), text) !=
            std::end(kIgnoredFeatureGates)) {
          d_.warning(path, "feature gate '" + text +
                               "' is a Go gateway gate that does not concern flow control; "
                               "ignored");
        } else {
          d_.error(path, "feature gate '" + text + "' is unknown or unregistered; known: " +
                             "flowControl, haPopulateNonLeaderDatastore, dataLayer, "
                             "prepareDataPlugins, enableLegacyMetrics");
        }
        continue;
      }
      bundle_.flowControlEnabled = value;
    }
  }

  void buildAllPlugins() {
    specs_ = readPluginList(json_, d_);
    for (const PluginSpec& spec : specs_) {
      const int owners = int(registries_.policies.contains(spec.type)) +
                         int(registries_.detectors.contains(spec.type)) +
                         int(registries_.fairness.contains(spec.type)) +
                         int(registries_.ordering.contains(spec.type)) +
                         int(registries_.evictionFilters.contains(spec.type)) +
                         int(registries_.evictionOrders.contains(spec.type));
      if (owners == 0) {
        d_.warning(spec.path + "/type", "\"" + spec.type +
                                            "\" is not a holdback plugin type (a Go gateway "
                                            "plugin?); accepted and ignored");
      } else if (owners > 1) {
        d_.error(spec.path + "/type",
                 "\"" + spec.type + "\" is registered as more than one kind of plugin");
      }
    }
    bundle_.policies = buildPlugins(specs_, registries_.policies, d_);
    bundle_.detectors = buildPlugins(specs_, registries_.detectors, d_);
    for (auto& [name, p] : buildPlugins(specs_, registries_.fairness, d_)) {
      bundle_.fairnessPolicies.emplace(name, std::move(p));
    }
    for (auto& [name, p] : buildPlugins(specs_, registries_.ordering, d_)) {
      bundle_.orderingPolicies.emplace(name, std::move(p));
    }
    eviction_filter_ = onlyPlugin(registries_.evictionFilters, "eviction filter");
    eviction_order_ = onlyPlugin(registries_.evictionOrders, "eviction order policy");
  }

  // The one plugin of an eviction kind in the file (upstream wires one of each, by type); null
  // when there is none (the built-in then) or more than one (an error at each extra one).
  template <class Interface>
  std::shared_ptr<const Interface> onlyPlugin(const PluginRegistry<Interface>& registry,
                                              std::string_view kind) {
    std::shared_ptr<const Interface> chosen;
    std::string first;
    for (const PluginSpec& spec : specs_) {
      if (!registry.contains(spec.type)) continue;
      if (!first.empty()) {
        d_.error(spec.path, "a second " + std::string(kind) + " plugin ('" + spec.name +
                                "'); only one is allowed (the first is '" + first + "')");
        continue;
      }
      first = spec.name;
      auto made = registry.create(spec);
      d_.append(made.diagnostics());
      if (made) chosen = std::move(made).value();
    }
    return chosen;
  }

  // flowControl.eviction (holdback extension), after enableEviction.
  void readEviction(ParamReader& fc) {
    EvictionOptions& e = bundle_.controller.eviction;
    e.filter = eviction_filter_ ? eviction_filter_ : std::make_shared<SheddableEvictionFilter>();
    e.order = eviction_order_ ? eviction_order_ : std::make_shared<PriorityThenTimeEvictionOrder>();
    e.confirmationGrace = deriveEvictionGrace(bundle_.detector.get());
    const Json* block = fc.value("eviction");
    ParamReader ev(block != nullptr && !block->is_null() ? block : nullptr, fc.pathOf("eviction"),
                   d_);
    if (const auto n = ev.integer("maxRevocationsPerDecision", 1,
                                  static_cast<std::int64_t>(kMaxRevocationsPerDecisionLimit))) {
      e.maxRevocationsPerDecision = static_cast<std::size_t>(*n);
    }
    if (const auto t = readDuration(ev, "confirmationTimeout", "EvictionConfirmationTimeout")) {
      e.confirmationTimeout = *t;
    }
    if (const auto g = readDuration(ev, "confirmationGrace", "EvictionConfirmationGrace")) {
      e.confirmationGrace = *g;
    }
    if (const auto w = readDuration(ev, "waitForReleasesTolerance", "waitForReleasesTolerance")) {
      e.waitForReleases = {.enabled = true, .tolerance = *w};
      if (*w <= Duration::zero()) {
        ev.error("waitForReleasesTolerance", "must be positive, but got " + formatDuration(*w));
      }
    }
    if (const auto f = ev.boolean("footprintAware")) e.footprintAware = *f;
    if (const auto b = ev.boolean("revokeOnBlock")) e.revokeOnBlock = *b;
    readRestoreReserve(ev, e.restoreReserve);
    ev.finish();
    // The struct's own checks, with the paths of the file's keys; the tolerance is checked above
    // (the struct's path, waitForReleases/tolerance, is no key of the file).
    EvictionOptions as_checked = e;
    as_checked.waitForReleases.enabled = false;
    Diagnostics checked;
    validateEvictionOptions(as_checked, ev.path(), /*requireEvict=*/false, checked);
    d_.append(checked);
  }

  // flowControl.eviction.restoreReserve: an object whose presence turns reserve restoration on
  // (as waitForReleasesTolerance turns wait-vs-evict on); `enabled: false` keeps it off. The
  // ranges are validateEvictionOptions' (same paths), except epsilon while it stays off, which
  // is checked here so that a wrong value is reported whether or not it is in use.
  void readRestoreReserve(ParamReader& ev, ReserveRestoreOptions& r) {
    const Json* block = ev.value("restoreReserve");
    if (block == nullptr || block->is_null()) return;
    if (!block->is_object()) {
      ev.error("restoreReserve",
               mismatch(*block, "an object {enabled, epsilon, leadTime, burstMemory}"));
      return;
    }
    ParamReader rr(block, ev.pathOf("restoreReserve"), d_);
    r.enabled = rr.boolean("enabled").value_or(true);
    if (const auto eps = rr.number("epsilon")) {
      r.epsilon = *eps;
      if (!r.enabled && !(*eps > 0.0 && *eps <= 0.5)) {
        rr.error("epsilon", "must be in (0, 0.5], but got " + formatNumber(*eps));
      }
    }
    if (const auto t = readDuration(rr, "leadTime", "restoreReserve leadTime")) r.leadTime = *t;
    if (const auto t = readDuration(rr, "burstMemory", "restoreReserve burstMemory")) {
      r.burstMemory = *t;
    }
    rr.finish();
  }

  // A band's fairnessPolicyRef / orderingPolicyRef. A name that is no plugin but is a built-in
  // type resolves to that type with defaults (the reference auto-injects fcfs and global-strict;
  // holdback also the other built-ins, so the reference's JSON example loads), one instance per
  // type for the whole file.
  template <class Interface>
  std::shared_ptr<const Interface> resolveBandPolicy(
      ParamReader& reader, std::string_view key,
      std::map<std::string, std::shared_ptr<const Interface>, std::less<>>& built,
      const PluginRegistry<Interface>& registry, std::shared_ptr<const Interface> fcfs_or_strict,
      std::string_view kind) {
    const auto ref = reader.string(key);
    if (!ref) return nullptr;
    if (const auto it = built.find(*ref); it != built.end()) return it->second;
    if (findPlugin(specs_, *ref) == nullptr && registry.contains(*ref)) {
      PluginSpec spec{*ref, *ref, nullptr, reader.pathOf(key)};
      auto made = registry.create(spec);
      // Kept under its type name, so that every band naming it shares one instance (a stateful
      // policy such as program-aware-fairness shares its program table) and the host finds it.
      if (made) return built.emplace(*ref, std::move(made).value()).first->second;
    }
    if (findPlugin(specs_, *ref) == nullptr && *ref == fcfs_or_strict->type()) {
      return fcfs_or_strict;
    }
    reportUnresolvedRef(reader.pathOf(key), *ref, specs_, registry, kind, d_);
    return nullptr;
  }

  // One band object; `label` names it in messages ("priority band 100", "default priority band").
  // `priority` receives the band's priority when it is valid, even if another field is not (so
  // that duplicates are still found).
  std::optional<BandOptions> readBand(const Json& object, const std::string& path,
                                      bool needsPriority, const std::string& label,
                                      std::optional<Priority>* priority_out = nullptr) {
    const std::size_t before = d_.errorCount();
    ParamReader reader(&object, path, d_);
    if (!reader.valid()) return std::nullopt;
    BandOptions band;
    const auto priority = reader.integer("priority", std::numeric_limits<Priority>::min(),
                                         std::numeric_limits<Priority>::max());
    if (needsPriority && !reader.has("priority")) {
      reader.error("priority", "missing; every entry of priorityBands needs a priority");
    }
    if (priority) band.priority = static_cast<Priority>(*priority);
    if (priority && priority_out != nullptr) *priority_out = band.priority;
    const std::string name = needsPriority ? label + " " + std::to_string(band.priority) : label;
    band.maxBytes = readQuantity(reader, "maxBytes", name + " MaxBytes").value_or(0);
    band.maxRequests = readQuantity(reader, "maxRequests", name + " MaxRequests").value_or(0);
    if (band.maxBytes == 0) band.maxBytes = BandTemplate{}.maxBytes;
    if (band.maxRequests == 0) band.maxRequests = BandTemplate{}.maxRequests;
    band.fairness = resolveBandPolicy<FairnessPolicy>(
        reader, "fairnessPolicyRef", bundle_.fairnessPolicies, registries_.fairness,
        globalStrictFairness(), "fairness policy");
    band.ordering =
        resolveBandPolicy<OrderingPolicy>(reader, "orderingPolicyRef", bundle_.orderingPolicies,
                                          registries_.ordering, fcfsOrdering(), "ordering policy");
    reader.finish();
    if (d_.errorCount() > before) return std::nullopt;
    // Explicit defaults, so that a bundle never holds a null policy.
    if (!band.fairness) band.fairness = globalStrictFairness();
    if (!band.ordering) band.ordering = fcfsOrdering();
    return band;
  }

  static BandTemplate toTemplate(const BandOptions& b) {
    return BandTemplate{b.maxRequests, b.maxBytes, b.fairness, b.ordering};
  }

  std::optional<std::string> readRef(ParamReader& reader, std::string_view key) {
    auto ref = reader.string(key);
    if (ref && ref->empty()) ref.reset();
    return ref;
  }

  void readFlowControl() {
    FlowControllerOptions& o = bundle_.controller;
    const Json* fc_json = nullptr;
    if (const auto it = json_.find("flowControl"); it != json_.end() && !it->is_null()) {
      fc_json = &*it;
    }
    ParamReader fc(fc_json, "/flowControl", d_);

    // The detector and the policy (each ref checked even when a plugin was invalid).
    fc.accept("saturationDetector");
    std::string detector_ref_path;
    const auto detector_ref = readSaturationDetectorRef(json_, detector_ref_path, d_);
    bundle_.detector = resolvePluginRef(saturationDetectorSlot(), detector_ref, detector_ref_path,
                                        bundle_.detectors, specs_, registries_.detectors, d_);
    bundle_.policy =
        resolvePluginRef(usageLimitPolicySlot(), readRef(fc, "usageLimitPolicyPluginRef"),
                         "/flowControl/usageLimitPolicyPluginRef", bundle_.policies, specs_,
                         registries_.policies, d_);

    // Limits, TTLs, bands.
    o.maxBytes = readQuantity(fc, "maxBytes", "global MaxBytes").value_or(0);
    o.maxRequests = readQuantity(fc, "maxRequests", "global MaxRequests").value_or(0);
    o.defaultRequestTtl = readDuration(fc, "defaultRequestTTL", "DefaultRequestTTL");
    o.noEndpointRequestTtl = readDuration(fc, "noEndpointRequestTTL", "NoEndpointRequestTTL");
    if (!o.defaultRequestTtl) o.defaultRequestTtl = kDefaultRequestTtl;
    if (!o.noEndpointRequestTtl) o.noEndpointRequestTtl = o.defaultRequestTtl;
    if (const auto enable = fc.boolean("enableEviction")) {
      bundle_.enableEviction = *enable;
      o.eviction.enabled = *enable;
    }
    readEviction(fc);
    if (const auto n = fc.integer("fairnessIdLabelLimit", 0,
                                  static_cast<std::int64_t>(kMaxFairnessIdLabelLimit))) {
      o.fairnessIdLabelLimit = static_cast<std::size_t>(*n);
    }
    o.defaultBand.fairness = globalStrictFairness();
    o.defaultBand.ordering = fcfsOrdering();
    if (const Json* t = fc.value("defaultPriorityBand"); t != nullptr && !t->is_null()) {
      if (auto band =
              readBand(*t, fc.pathOf("defaultPriorityBand"), false, "default priority band")) {
        o.defaultBand = toTemplate(*band);
      }
    }
    if (const Json* t = fc.value("defaultNegativePriorityBand"); t != nullptr && !t->is_null()) {
      if (auto band = readBand(*t, fc.pathOf("defaultNegativePriorityBand"), false,
                               "default negative priority band")) {
        o.defaultNegativeBand = toTemplate(*band);
      }
    }
    if (const Json* list = fc.value("priorityBands"); list != nullptr && !list->is_null()) {
      if (!list->is_array()) {
        fc.error("priorityBands", mismatch(*list, "an array of band objects"));
      } else {
        std::map<Priority, std::size_t> seen;
        for (std::size_t i = 0; i < list->size(); ++i) {
          const std::string path = fc.pathOf("priorityBands") + "/" + std::to_string(i);
          std::optional<Priority> priority;
          auto band = readBand((*list)[i], path, true, "priority band", &priority);
          if (!priority) continue;
          if (const auto [it, fresh] = seen.emplace(*priority, i); !fresh) {
            d_.error(path + "/priority", "duplicate priority level " + std::to_string(*priority) +
                                             " (first at " + fc.pathOf("priorityBands") + "/" +
                                             std::to_string(it->second) + ")");
            continue;
          }
          if (band) o.bands.push_back(std::move(*band));
        }
      }
    }
    fc.finish();

    if (!bundle_.flowControlEnabled) {
      std::string set;
      for (std::string_view key :
           {"maxBytes", "maxRequests", "defaultRequestTTL", "noEndpointRequestTTL",
            "defaultPriorityBand", "defaultNegativePriorityBand", "priorityBands",
            "usageLimitPolicyPluginRef"}) {
        if (fc.has(key)) set += (set.empty() ? "" : ", ") + std::string(key);
      }
      if (!set.empty()) {
        d_.warning("/flowControl",
                   "the flowControl feature gate is off; these fields have no "
                   "effect (they are checked anyway): " +
                       set);
      }
      // No gating: the defaults, with the static policy at threshold 1.0.
      FlowControllerOptions off;
      off.policy = std::move(StaticUsageLimitPolicy::create()).value();
      off.detector = bundle_.detector;
      off.defaultBand.fairness = globalStrictFairness();
      off.defaultBand.ordering = fcfsOrdering();
      off.fairnessIdLabelLimit = o.fairnessIdLabelLimit;  // metrics, not gating
      bundle_.policy = off.policy;
      o = std::move(off);
      return;
    }
    o.policy = bundle_.policy;
    o.detector = bundle_.detector;
  }

  const Json& json_;
  const Registries& registries_;
  ConfigBundle& bundle_;
  Diagnostics& d_;
  std::vector<PluginSpec> specs_;
  std::shared_ptr<const EvictionFilter> eviction_filter_;
  std::shared_ptr<const EvictionOrderPolicy> eviction_order_;
};

}  // namespace detail

namespace config {

HOLDBACK_INLINE FairnessRegistry builtinFairnessRegistry() {
  FairnessRegistry registry;
  registry.add(std::string(GlobalStrictFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<FairnessPolicy>(
                     spec, diagnostics, std::make_unique<GlobalStrictFairnessPolicy>());
               });
  registry.add(std::string(RoundRobinFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<FairnessPolicy>(
                     spec, diagnostics, std::make_unique<RoundRobinFairnessPolicy>());
               });
  registry.add(std::string(ProgramAwareFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::parseProgramAwareFairness(spec, diagnostics);
               });
  return registry;
}

HOLDBACK_INLINE EvictionFilterRegistry builtinEvictionFilterRegistry() {
  EvictionFilterRegistry registry;
  registry.add(std::string(kSheddableEvictionFilterType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<EvictionFilter>(
                     spec, diagnostics, std::make_unique<SheddableEvictionFilter>());
               });
  return registry;
}

HOLDBACK_INLINE EvictionOrderRegistry builtinEvictionOrderRegistry() {
  EvictionOrderRegistry registry;
  registry.add(std::string(kPriorityThenTimeEvictionOrderType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<EvictionOrderPolicy>(
                     spec, diagnostics, std::make_unique<PriorityThenTimeEvictionOrder>());
               });
  return registry;
}

HOLDBACK_INLINE OrderingRegistry builtinOrderingRegistry() {
  OrderingRegistry registry;
  registry.add(std::string(FcfsOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(
                     spec, diagnostics, std::make_unique<FcfsOrderingPolicy>());
               });
  registry.add(std::string(EdfOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(spec, diagnostics,
                                                             std::make_unique<EdfOrderingPolicy>());
               });
  registry.add(std::string(SloDeadlineOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(
                     spec, diagnostics, std::make_unique<SloDeadlineOrderingPolicy>());
               });
  return registry;
}

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
