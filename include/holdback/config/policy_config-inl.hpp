// Implementation of holdback/config/policy_config.hpp: compiled into libholdback by
// src/config/policy_config.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/policy_config.hpp"

#include "holdback/core/duration.hpp"

#include <limits>
#include <map>
#include <set>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

inline constexpr std::int64_t kPriorityMin = std::numeric_limits<Priority>::min();
inline constexpr std::int64_t kPriorityMax = std::numeric_limits<Priority>::max();

// Appends `from` to `to`, skipping errors at a path that already has an error in `to` since
// `first`: a value with the wrong type is reported once, not again as "missing".
HOLDBACK_INLINE void appendNew(Diagnostics& to, std::size_t first, const Diagnostics& from) {
  std::set<std::string> reported;
  for (std::size_t i = first; i < to.all().size(); ++i) reported.insert(to.all()[i].path);
  for (const Diagnostic& d : from.all()) {
    if (d.severity == Severity::kError && reported.count(d.path) != 0) continue;
    to.add(d);
  }
}

HOLDBACK_INLINE std::vector<StaticCeiling> parseStaticCeilings(const Json& map,
                                                               const std::string& path,
                                                               Diagnostics& diagnostics) {
  std::vector<StaticCeiling> out;
  if (!map.is_object()) {
    diagnostics.error(path, mismatch(map, "an object mapping priority to ceiling"));
    return out;
  }
  for (const auto& [key, value] : map.items()) {
    const std::string entry_path = joinPath(path, key);
    const auto priority = parseIntegerKey(key, kPriorityMin, kPriorityMax);
    if (!priority) {
      diagnostics.error(entry_path, "\"" + key + "\" is not an integer priority in [" +
                                        std::to_string(kPriorityMin) + ", " +
                                        std::to_string(kPriorityMax) + "]");
    }
    if (!value.is_number()) {
      diagnostics.error(entry_path, mismatch(value, "a ceiling in [0.0, 1.0]"));
    }
    if (priority && value.is_number()) {
      out.push_back(StaticCeiling{static_cast<Priority>(*priority), value.get<double>()});
    }
  }
  return out;
}

// A duration-string field of `reader` (an error naming what is allowed otherwise).
HOLDBACK_INLINE std::optional<Duration> durationField(ParamReader& reader, std::string_view key) {
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  const auto parsed = v->is_string() ? parseDuration(v->get<std::string>()) : std::nullopt;
  if (!parsed) reader.error(key, mismatch(*v, R"(a duration string such as "300ms" or "5s")"));
  return parsed;
}

// An object keyed by integer priority at `at`: `add(priority, value)` for every entry whose key
// is a priority and whose value `read` accepts (read returns nullopt to reject it).
template <class Read, class Add>
void readPriorityMap(const Json& map, const std::string& at, std::string_view expected,
                     Diagnostics& diagnostics, Read read, Add add) {
  if (!map.is_object()) {
    diagnostics.error(at, mismatch(map, "an object mapping priority to " + std::string(expected)));
    return;
  }
  for (const auto& [key, value] : map.items()) {
    const auto priority = parseIntegerKey(key, kPriorityMin, kPriorityMax);
    if (!priority)
      diagnostics.error(joinPath(at, key), "\"" + key + "\" is not an integer priority");
    const auto parsed = read(value);
    if (!parsed) diagnostics.error(joinPath(at, key), mismatch(value, expected));
    if (priority && parsed) add(static_cast<Priority>(*priority), *parsed);
  }
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE std::optional<StaticUsageLimitOptions> parseStaticUsageLimitOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics) {
  const std::size_t first = diagnostics.all().size();
  const std::size_t errors_before = diagnostics.errorCount();
  ParamReader reader(parameters, path, diagnostics);
  if (!reader.valid()) return std::nullopt;
  StaticUsageLimitOptions options;
  if (const auto threshold = reader.number("threshold")) options.threshold = *threshold;
  reader.finish();
  Diagnostics checks;
  StaticUsageLimitPolicy::validate(options, path, checks);
  detail::appendNew(diagnostics, first, checks);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return options;
}

HOLDBACK_INLINE std::optional<PriorityHoldbackOptions> parsePriorityHoldbackOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics) {
  const std::size_t first = diagnostics.all().size();
  const std::size_t errors_before = diagnostics.errorCount();
  ParamReader reader(parameters, path, diagnostics);
  if (!reader.valid()) return std::nullopt;

  // Read every key first, so that type errors are reported whatever the strategy.
  const auto strategy = reader.oneOf(
      "strategy", {"stepwise-spread", "linear-proportional", "sigmoid-smoothed", "static"});
  const auto shape = reader.oneOf("shape", {"linear", "sigmoid"});
  const auto domain = reader.oneOf("domain", {"rank", "value", "explicit"});
  const auto sigmoid_domain = reader.oneOf("sigmoidDomain", {"rank", "value"});
  const auto min_ceiling = reader.number("minCeiling");
  const auto max_ceiling = reader.number("maxCeiling");
  const auto steepness = reader.number("sigmoidSteepness");
  const auto midpoint = reader.number("sigmoidMidpoint");
  const auto default_ceiling = reader.number("defaultCeiling");
  const Json* ceilings = reader.value("ceilings");
  reader.finish();

  const bool reference_spelling = reader.has("shape") || reader.has("domain");
  PriorityHoldbackOptions options;
  bool strategy_known = true;

  if (reader.has("strategy")) {
    for (const char* key : {"shape", "domain"}) {
      if (reader.has(key)) {
        reader.error(key,
                     "cannot be combined with \"strategy\"; use either strategy (with "
                     "sigmoidDomain) or shape and domain, not both");
      }
    }
    if (!strategy) {
      strategy_known = false;
    } else if (*strategy == "stepwise-spread") {
      options.strategy = HoldbackStrategy::kStepwiseSpread;
    } else if (*strategy == "linear-proportional") {
      options.strategy = HoldbackStrategy::kLinearProportional;
    } else if (*strategy == "sigmoid-smoothed") {
      options.strategy = HoldbackStrategy::kSigmoidSmoothed;
    } else {
      options.strategy = HoldbackStrategy::kStatic;
    }
  } else if (reference_spelling) {
    if (reader.has("sigmoidDomain")) {
      reader.error("sigmoidDomain",
                   "cannot be combined with \"shape\"/\"domain\"; with that spelling the sigmoid "
                   "domain is given by \"domain\"");
    }
    if ((reader.has("shape") && !shape) || (reader.has("domain") && !domain)) {
      strategy_known = false;
    } else if (domain.value_or("rank") == "explicit") {
      if (reader.has("shape")) {
        reader.error("shape", "does not apply to domain \"explicit\" (a static map has no shape)");
      }
      options.strategy = HoldbackStrategy::kStatic;
    } else {
      const bool value = domain.value_or("rank") == "value";
      if (shape.value_or("linear") == "sigmoid") {
        options.strategy = HoldbackStrategy::kSigmoidSmoothed;
        options.sigmoidDomain = value ? SigmoidDomain::kValue : SigmoidDomain::kRank;
      } else {
        options.strategy =
            value ? HoldbackStrategy::kLinearProportional : HoldbackStrategy::kStepwiseSpread;
      }
    }
  }
  if (reader.has("strategy") && sigmoid_domain) {
    options.sigmoidDomain =
        *sigmoid_domain == "value" ? SigmoidDomain::kValue : SigmoidDomain::kRank;
  }

  if (strategy_known) {
    const std::string name = "\"" + std::string(toString(options.strategy)) + "\"";
    const bool is_sigmoid = options.strategy == HoldbackStrategy::kSigmoidSmoothed;
    const bool is_static = options.strategy == HoldbackStrategy::kStatic;
    if (is_static && reader.has("minCeiling")) {
      reader.error("minCeiling", "does not apply to strategy \"static\"");
    }
    for (const char* key : {"sigmoidSteepness", "sigmoidMidpoint", "sigmoidDomain"}) {
      if (!is_sigmoid && reader.has(key) &&
          !(reference_spelling && std::string(key) == "sigmoidDomain")) {
        reader.error(key, "applies only to strategy \"sigmoid-smoothed\", not " + name);
      }
    }
    for (const char* key : {"ceilings", "defaultCeiling"}) {
      if (!is_static && reader.has(key)) {
        reader.error(key, "applies only to strategy \"static\", not " + name);
      }
    }
  }

  if (min_ceiling) options.minCeiling = *min_ceiling;
  if (max_ceiling) options.maxCeiling = *max_ceiling;
  if (steepness) options.sigmoidSteepness = *steepness;
  if (midpoint) options.sigmoidMidpoint = *midpoint;
  if (default_ceiling) options.defaultCeiling = *default_ceiling;
  if (ceilings != nullptr) {
    options.ceilings =
        detail::parseStaticCeilings(*ceilings, reader.pathOf("ceilings"), diagnostics);
  }

  Diagnostics checks;
  if (strategy_known) {
    PriorityHoldbackPolicy::validate(options, path, checks);
  } else {
    // The strategy is unreadable: still range-check the values that were given.
    PriorityHoldbackOptions probe = options;
    probe.strategy = HoldbackStrategy::kSigmoidSmoothed;
    if (!probe.minCeiling) probe.minCeiling = 0.0;
    PriorityHoldbackPolicy::validate(probe, path, checks);
  }
  detail::appendNew(diagnostics, first, checks);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return options;
}

HOLDBACK_INLINE std::optional<ReservationOptions> parseReservationOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics) {
  const std::size_t first = diagnostics.all().size();
  const std::size_t errors_before = diagnostics.errorCount();
  ParamReader reader(parameters, path, diagnostics);
  if (!reader.valid()) return std::nullopt;
  ReservationOptions options;
  if (const auto v = reader.number("epsilon")) options.epsilon = *v;
  if (const auto v = reader.number("minCeiling")) options.minCeiling = *v;
  if (const auto v = reader.number("maxCeiling")) options.maxCeiling = *v;
  if (const auto v = reader.number("minReserve")) options.minReserve = *v;
  if (const auto v = reader.number("minReserveShare")) options.minReserveShare = *v;
  if (const auto v = reader.number("requestUnit")) options.requestUnit = *v;
  auto durationOf = [](const Json& v) -> std::optional<Duration> {
    return v.is_string() ? parseDuration(v.get<std::string>()) : std::nullopt;
  };
  if (const auto v = detail::durationField(reader, "refillHorizon")) options.refillHorizon = *v;
  if (const auto v = detail::durationField(reader, "riseTime")) options.smoothing.rise = *v;
  if (const auto v = detail::durationField(reader, "decayTime")) options.smoothing.decay = *v;
  if (const auto v = reader.number("riseSignificance")) options.smoothing.riseSignificance = *v;
  if (const auto v = reader.oneOf("sizing", {"refill", "occupancy"})) {
    options.sizing = *v == "occupancy" ? ReservationSizing::kOccupancy : ReservationSizing::kRefill;
  }
  if (const auto v = reader.boolean("poissonSizing")) options.poissonSizing = *v;
  if (const auto v = reader.oneOf("capacityModel", {"pooled", "endpoints"})) {
    options.capacityModel =
        *v == "endpoints" ? ReservationCapacity::kEndpoints : ReservationCapacity::kPooled;
  }
  if (const auto v = reader.boolean("holdReserve")) options.holdReserve = *v;
  if (const auto v = reader.boolean("protectiveStart")) options.protectiveStart = *v;
  if (const Json* fb = reader.value("feedback")) {
    ParamReader sub(fb, reader.pathOf("feedback"), diagnostics);
    if (sub.valid()) {
      ReservationFeedback& f = options.feedback;
      f.enabled = sub.boolean("enabled").value_or(true);
      if (const auto v = detail::durationField(sub, "targetWait")) f.targetWait = *v;
      if (const auto v = detail::durationField(sub, "interval")) f.interval = *v;
      if (const auto v = sub.number("increase")) f.increase = *v;
      if (const auto v = sub.number("decrease")) f.decrease = *v;
      if (const auto v = sub.number("maxExtra")) f.maxExtra = *v;
      if (const Json* map = sub.value("targets")) {
        detail::readPriorityMap(*map, sub.pathOf("targets"), "a duration string such as \"50ms\"",
                                diagnostics, durationOf, [&](Priority p, Duration wait) {
                                  f.targets.push_back({.priority = p, .wait = wait});
                                });
      }
      sub.finish();
    }
  }
  if (const Json* map = reader.value("epsilons")) {
    detail::readPriorityMap(
        *map, reader.pathOf("epsilons"), "an epsilon in (0.0, 0.5]", diagnostics,
        [](const Json& v) { return v.is_number() ? std::optional(v.get<double>()) : std::nullopt; },
        [&](Priority p, double eps) {
          options.epsilons.push_back({.priority = p, .epsilon = eps});
        });
  }
  reader.finish();
  for (const char* key : {"sizing", "feedback"}) reader.deprecated(key, kAblationSwitch);
  reader.deprecated("epsilons",
                    "remove it; one epsilon for every band, which reserve restoration aims for "
                    "too");
  reader.deprecated("requestUnit",
                    "remove it; the controller reports the saturation per request in flight");
  reader.deprecated("refillHorizon",
                    "remove it; estimated from the lower bands' requests in flight and their "
                    "holding times");
  reader.deprecated("maxCeiling",
                    "remove it; the top band's ceiling is 1.0 (the detector's thresholds and "
                    "headroom bound the pool)");
  for (const char* key : {"holdReserve", "protectiveStart"}) {
    reader.deprecated(key,
                      "remove it; on unless flowControl.eviction.restoreReserve is on, which "
                      "repairs the reserve instead");
  }
  Diagnostics checks;
  ReservationPolicy::validate(options, path, checks);
  detail::appendNew(diagnostics, first, checks);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return options;
}

HOLDBACK_INLINE PolicyRegistry builtinPolicyRegistry() {
  PolicyRegistry registry;
  registry.add(std::string(StaticUsageLimitPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 std::unique_ptr<UsageLimitPolicy> out;
                 const auto options = parseStaticUsageLimitOptions(
                     spec.parameters, spec.parametersPath(), diagnostics);
                 if (options) {
                   auto made = StaticUsageLimitPolicy::create(*options, spec.name);
                   if (made) out = std::move(made).value();
                 }
                 return out;
               });
  registry.add(std::string(PriorityHoldbackPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 std::unique_ptr<UsageLimitPolicy> out;
                 auto options = parsePriorityHoldbackOptions(spec.parameters, spec.parametersPath(),
                                                             diagnostics);
                 if (options) {
                   auto made = PriorityHoldbackPolicy::create(std::move(*options), spec.name);
                   if (made) out = std::move(made).value();
                 }
                 return out;
               });
  registry.add(
      std::string(ReservationPolicy::kType), [](const PluginSpec& spec, Diagnostics& diagnostics) {
        std::unique_ptr<UsageLimitPolicy> out;
        auto options = parseReservationOptions(spec.parameters, spec.parametersPath(), diagnostics);
        if (options) {
          auto made = ReservationPolicy::create(std::move(*options), spec.name);
          if (made) out = std::move(made).value();
        }
        return out;
      });
  registry.add(std::string(SoftReflectiveCeilingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 std::unique_ptr<UsageLimitPolicy> out;
                 ParamReader reader(spec.parameters, spec.parametersPath(), diagnostics);
                 const std::size_t errors_before = diagnostics.errorCount();
                 if (spec.parameters != nullptr && spec.parameters->is_object()) {
                   for (const auto& [key, value] : spec.parameters->items()) {
                     reader.error(key, "unknown key \"" + key +
                                           "\"; soft-reflective-ceiling-policy takes no "
                                           "parameters");
                   }
                 }
                 if (diagnostics.errorCount() == errors_before) {
                   out = std::move(SoftReflectiveCeilingPolicy::create(spec.name)).value();
                 }
                 return out;
               });
  return registry;
}

HOLDBACK_INLINE PluginSlot<UsageLimitPolicy> usageLimitPolicySlot() {
  PluginSlot<UsageLimitPolicy> slot;
  slot.kind = "usage limit policy";
  slot.defaultName = StaticUsageLimitPolicy::kType;
  slot.makeDefault = [] {
    return std::shared_ptr<UsageLimitPolicy>(std::move(StaticUsageLimitPolicy::create()).value());
  };
  slot.readRef = [](const Json& document, std::string& refPath, Diagnostics& diagnostics) {
    std::optional<std::string> ref;
    refPath = "/flowControl/usageLimitPolicyPluginRef";
    if (const auto fc = document.find("flowControl"); fc != document.end()) {
      ParamReader flow_control(&*fc, "/flowControl", diagnostics);
      ref = flow_control.string("usageLimitPolicyPluginRef");
      if (ref && ref->empty()) ref.reset();
    }
    return ref;
  };
  slot.warnOtherTypes = true;
  return slot;
}

HOLDBACK_INLINE Result<std::shared_ptr<UsageLimitPolicy>> loadUsageLimitPolicy(
    const Json& document, const PolicyRegistry& registry) {
  return loadPlugin(document, registry, usageLimitPolicySlot());
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
