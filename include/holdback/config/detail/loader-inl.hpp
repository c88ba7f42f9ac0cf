// Implementation of holdback/config/detail/loader.hpp (compiled by src/config.cpp through
// config/endpoint_picker_config-inl.hpp, or included by that file in header-only mode).
#pragma once

#include "holdback/config/detail/loader.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "holdback/config/detail/derived_defaults.hpp"
#include "holdback/config/detail/field_table.hpp"
#include "holdback/config/detail/flow_control_fields.hpp"
#include "holdback/config/quantity.hpp"
#include "holdback/config/reference_profile.hpp"
#include "holdback/core/duration.hpp"
#include "holdback/flow/detail/band_fields.hpp"
#include "holdback/flow/detail/band_scheduling_fields.hpp"
#include "holdback/flow/detail/eviction_fields.hpp"
#include "holdback/flow/options.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

HOLDBACK_INLINE void Loader::run() {
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
  applyDerivedDefaults(bundle_, json_);
  if (bundle_.profile == kReferenceProfile) applyReferenceProfile(bundle_, json_, d_);
}

HOLDBACK_INLINE void Loader::readHeader(ParamReader& top) {
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

HOLDBACK_INLINE void Loader::readFeatureGates(ParamReader& top) {
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

HOLDBACK_INLINE void Loader::buildAllPlugins() {
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

template <class Interface>
std::shared_ptr<const Interface> Loader::onlyPlugin(const PluginRegistry<Interface>& registry,
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

HOLDBACK_INLINE void Loader::readEviction(ParamReader& fc) {
  EvictionOptions& e = bundle_.controller.eviction;
  e.filter = eviction_filter_ ? eviction_filter_ : std::make_shared<SheddableEvictionFilter>();
  e.order = eviction_order_ ? eviction_order_ : std::make_shared<PriorityThenTimeEvictionOrder>();
  e.confirmationGrace = deriveEvictionGrace(bundle_.detector.get());
  const Json* block = fc.value("eviction");
  ParamReader ev(block != nullptr && !block->is_null() ? block : nullptr, fc.pathOf("eviction"),
                 d_);
  readFields<EvictionOptions>(
      ev, kEvictionFields, e, [&](std::string_view key, EvictionOptions& o) {
        if (key == "restoreReserve") {
          readRestoreReserve(ev, o.restoreReserve);
        } else if (const auto w = flowDurationField(ev, key, key)) {  // waitForReleasesTolerance
          o.waitForReleases = {.enabled = true, .tolerance = *w};
          if (*w <= Duration::zero())
            ev.error(key, "must be positive, but got " + formatDuration(*w));
        }
      });
  ev.finish();
  warnDeprecated<EvictionOptions>(ev, kEvictionFields);
  // The struct's own checks, with the paths of the file's keys; the tolerance is checked above
  // (the struct's path, waitForReleases/tolerance, is no key of the file).
  EvictionOptions as_checked = e;
  as_checked.waitForReleases.enabled = false;
  Diagnostics checked;
  validateEvictionOptions(as_checked, ev.path(), /*requireEvict=*/false, checked);
  d_.append(checked);
}

HOLDBACK_INLINE void Loader::readBandScheduling(ParamReader& fc, BandSchedulingOptions& out) {
  const Json* block = fc.value("bandScheduling");
  if (block == nullptr || block->is_null()) return;
  ParamReader bs(block, fc.pathOf("bandScheduling"), d_);
  readFields<BandSchedulingOptions>(bs, kBandSchedulingFields, out,
                                    [](std::string_view, BandSchedulingOptions&) {});
  bs.finish();
  if (bs.valid()) validateBandScheduling(out, bs.path(), d_);
}

HOLDBACK_INLINE void Loader::readRestoreReserve(ParamReader& ev, ReserveRestoreOptions& r) {
  const Json* block = ev.value("restoreReserve");
  if (block == nullptr || block->is_null()) return;
  if (!block->is_object()) {
    // The keys a file should write (the table's, less the deprecated ones).
    std::string keys;
    for (const auto& field : kReserveRestoreFields) {
      if (!field.deprecated.empty()) continue;
      keys += (keys.empty() ? "" : ", ") + std::string(field.key);
    }
    ev.error("restoreReserve", mismatch(*block, "an object {" + keys + "}"));
    return;
  }
  ParamReader rr(block, ev.pathOf("restoreReserve"), d_);
  r.enabled = true;  // the block's presence turns it on
  readFields<ReserveRestoreOptions>(
      rr, kReserveRestoreFields, r, [&](std::string_view key, ReserveRestoreOptions& o) {
        const auto eps = rr.number(key);  // epsilon
        if (!eps) return;
        o.epsilon = *eps;
        if (!o.enabled && !(*eps > 0.0 && *eps <= 0.5)) {
          rr.error(key, "must be in (0, 0.5], but got " + formatNumber(*eps));
        }
      });
  rr.finish();
  warnDeprecated<ReserveRestoreOptions>(rr, kReserveRestoreFields);
}

template <class Interface>
std::shared_ptr<const Interface> Loader::resolveBandPolicy(
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

HOLDBACK_INLINE std::optional<BandOptions> Loader::readBand(const Json& object,
                                                            const std::string& path,
                                                            bool needsPriority,
                                                            const std::string& label,
                                                            std::optional<Priority>* priority_out) {
  const std::size_t before = d_.errorCount();
  ParamReader reader(&object, path, d_);
  if (!reader.valid()) return std::nullopt;
  BandOptions band;
  const FieldTable<BandOptions> fields = kBandFields;
  const auto by_hand = [&](std::string_view key, BandOptions& b) {
    if (key == "weight") {
      if (const auto w = reader.number(key)) {
        b.weight = *w;
        validateBandWeight(*w, reader.pathOf(key), d_);
      }
    } else if (key == "fairnessPolicyRef") {
      b.fairness = resolveBandPolicy<FairnessPolicy>(reader, key, bundle_.fairnessPolicies,
                                                     registries_.fairness, globalStrictFairness(),
                                                     "fairness policy");
    } else {
      b.ordering = resolveBandPolicy<OrderingPolicy>(reader, key, bundle_.orderingPolicies,
                                                     registries_.ordering, fcfsOrdering(),
                                                     "ordering policy");
    }
  };
  // priority first: the other rows' messages name the band by it.
  const std::size_t before_priority = d_.errorCount();
  readFields(reader, fields.first(1), band, by_hand);
  if (needsPriority && !reader.has("priority")) {
    reader.error("priority", "missing; every entry of priorityBands needs a priority");
  }
  if (priority_out != nullptr && reader.has("priority") && d_.errorCount() == before_priority) {
    *priority_out = band.priority;
  }
  const std::string name = needsPriority ? label + " " + std::to_string(band.priority) : label;
  readFields(reader, fields.subspan(1), band, by_hand, name + " ");
  // 0 is the default limit.
  if (band.maxBytes == 0) band.maxBytes = BandTemplate{}.maxBytes;
  if (band.maxRequests == 0) band.maxRequests = BandTemplate{}.maxRequests;
  reader.finish();
  if (d_.errorCount() > before) return std::nullopt;
  // Explicit defaults, so that a bundle never holds a null policy.
  if (!band.fairness) band.fairness = globalStrictFairness();
  if (!band.ordering) band.ordering = fcfsOrdering();
  return band;
}

HOLDBACK_INLINE BandTemplate Loader::toTemplate(const BandOptions& b) {
  return BandTemplate{b.maxRequests, b.maxBytes, b.fairness, b.ordering, b.requestTtl, b.weight};
}

HOLDBACK_INLINE std::optional<std::string> Loader::readRef(ParamReader& reader,
                                                           std::string_view key) {
  auto ref = reader.string(key);
  if (ref && ref->empty()) ref.reset();
  return ref;
}

HOLDBACK_INLINE void Loader::readFlowControlKey(ParamReader& fc, std::string_view key) {
  FlowControllerOptions& o = bundle_.controller;
  if (key == "profile") {
    if (const auto p = fc.oneOf(key, {kHoldbackProfile, kReferenceProfile})) bundle_.profile = *p;
  } else if (key == "usageLimitPolicyPluginRef") {
    bundle_.policy = resolvePluginRef(usageLimitPolicySlot(), readRef(fc, key), fc.pathOf(key),
                                      bundle_.policies, specs_, registries_.policies, d_);
  } else if (key == "saturationDetector") {  // checked even when a plugin was invalid
    fc.accept(key);
    std::string ref_path;
    const auto ref = readSaturationDetectorRef(json_, ref_path, d_);
    bundle_.detector = resolvePluginRef(saturationDetectorSlot(), ref, ref_path, bundle_.detectors,
                                        specs_, registries_.detectors, d_);
  } else if (key == "dispatchLedger") {  // the host's, beside the detector (with the gate off too)
    fc.accept(key);
    bundle_.dispatchLedger = loadDispatchLedgerOptions(json_, bundle_.detector.get(), d_);
  } else if (key == "eviction") {
    readEviction(fc);
  } else if (key == "bandScheduling") {
    readBandScheduling(fc, o.bandScheduling);
  } else if (key == "priorityBands") {
    readPriorityBands(fc);
  } else if (const Json* t = fc.value(key); t != nullptr && !t->is_null()) {
    const bool negative = key == "defaultNegativePriorityBand";
    const auto band =
        readBand(*t, fc.pathOf(key), false,
                 negative ? "default negative priority band" : "default priority band");
    if (band && negative) o.defaultNegativeBand = toTemplate(*band);
    if (band && !negative) o.defaultBand = toTemplate(*band);
  }
}

HOLDBACK_INLINE void Loader::readPriorityBands(ParamReader& fc) {
  const Json* list = fc.value("priorityBands");
  if (list == nullptr || list->is_null()) return;
  if (!list->is_array()) {
    fc.error("priorityBands", mismatch(*list, "an array of band objects"));
    return;
  }
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
    if (band) bundle_.controller.bands.push_back(std::move(*band));
  }
}

HOLDBACK_INLINE void Loader::readFlowControl() {
  FlowControllerOptions& o = bundle_.controller;
  const Json* fc_json = nullptr;
  if (const auto it = json_.find("flowControl"); it != json_.end() && !it->is_null()) {
    fc_json = &*it;
  }
  ParamReader fc(fc_json, "/flowControl", d_);
  o.defaultBand.fairness = globalStrictFairness();
  o.defaultBand.ordering = fcfsOrdering();
  // In the loader's order (readBefore): the detector first, then the ledger and eviction, which
  // derive from it.
  readFields<config::ConfigBundle>(
      fc, kFlowControlFields, bundle_,
      [&](std::string_view key, config::ConfigBundle&) { readFlowControlKey(fc, key); });
  if (!o.defaultRequestTtl) o.defaultRequestTtl = kDefaultRequestTtl;
  if (!o.noEndpointRequestTtl) o.noEndpointRequestTtl = o.defaultRequestTtl;
  o.eviction.enabled = bundle_.enableEviction;
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

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
