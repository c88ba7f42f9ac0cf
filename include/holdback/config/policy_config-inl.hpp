// Implementation of holdback/config/policy_config.hpp: compiled into libholdback by
// src/config/policy_config.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/policy_config.hpp"

#include "holdback/config/detail/field_table.hpp"
#include "holdback/core/duration.hpp"
#include "holdback/policy/detail/policies_fields.hpp"
#include "holdback/policy/detail/reservation_fields.hpp"

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

// reservation-holdback-policy's deprecated `feedback` block.
HOLDBACK_INLINE void readFeedback(const Json& block, const std::string& at,
                                  Diagnostics& diagnostics, ReservationFeedback& f) {
  ParamReader sub(&block, at, diagnostics);
  if (!sub.valid()) return;
  f.enabled = sub.boolean("enabled").value_or(true);
  if (const auto v = durationField(sub, "targetWait")) f.targetWait = *v;
  if (const auto v = durationField(sub, "interval")) f.interval = *v;
  if (const auto v = sub.number("increase")) f.increase = *v;
  if (const auto v = sub.number("decrease")) f.decrease = *v;
  if (const auto v = sub.number("maxExtra")) f.maxExtra = *v;
  if (const Json* map = sub.value("targets")) {
    const auto durationOf = [](const Json& v) -> std::optional<Duration> {
      return v.is_string() ? parseDuration(v.get<std::string>()) : std::nullopt;
    };
    readPriorityMap(
        *map, sub.pathOf("targets"), "a duration string such as \"50ms\"", diagnostics, durationOf,
        [&](Priority p, Duration wait) { f.targets.push_back({.priority = p, .wait = wait}); });
  }
  sub.finish();
}

// reservation-holdback-policy's deprecated `epsilons` map.
HOLDBACK_INLINE void readEpsilons(const Json& map, const std::string& at, Diagnostics& diagnostics,
                                  std::vector<ReservationEpsilon>& out) {
  readPriorityMap(
      map, at, "an epsilon in (0.0, 0.5]", diagnostics,
      [](const Json& v) { return v.is_number() ? std::optional(v.get<double>()) : std::nullopt; },
      [&](Priority p, double eps) { out.push_back({.priority = p, .epsilon = eps}); });
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
  detail::readFields<StaticUsageLimitOptions>(reader, kStaticUsageLimitFields, options,
                                              [](std::string_view, StaticUsageLimitOptions&) {});
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

  // Read every key first, so that type errors are reported whatever the strategy. The strategy
  // (in either spelling), sigmoidDomain and ceilings are read by hand, and applied below.
  const FieldTable<PriorityHoldbackOptions> fields = kPriorityHoldbackFields;
  PriorityHoldbackOptions options;
  std::optional<HoldbackStrategy> strategy;
  std::optional<std::string> shape;
  std::optional<std::string> domain;
  std::optional<int> sigmoid_domain;
  const Json* ceilings = nullptr;
  detail::readFields(reader, fields, options, [&](std::string_view key, PriorityHoldbackOptions&) {
    if (key == "strategy") {
      if (const auto v = detail::readChoice(reader, key, findField(fields, key)->choices)) {
        strategy = static_cast<HoldbackStrategy>(*v);
      }
      shape = reader.oneOf("shape", {"linear", "sigmoid"});
      domain = reader.oneOf("domain", {"rank", "value", "explicit"});
    } else if (key == "sigmoidDomain") {
      sigmoid_domain = detail::readChoice(reader, key, findField(fields, key)->choices);
    } else {
      ceilings = reader.value(key);
    }
  });
  reader.finish();

  const bool reference_spelling = reader.has("shape") || reader.has("domain");
  bool strategy_known = true;

  if (reader.has("strategy")) {
    for (const char* key : {"shape", "domain"}) {
      if (reader.has(key)) {
        reader.error(key,
                     "cannot be combined with \"strategy\"; use either strategy (with "
                     "sigmoidDomain) or shape and domain, not both");
      }
    }
    if (strategy) {
      options.strategy = *strategy;
    } else {
      strategy_known = false;
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
    options.sigmoidDomain = static_cast<SigmoidDomain>(*sigmoid_domain);
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
  const FieldTable<ReservationOptions> fields = kReservationFields;
  ReservationOptions options;
  detail::readFields(reader, fields, options, [&](std::string_view key, ReservationOptions& o) {
    if (key == "epsilons") {
      if (const Json* map = reader.value(key)) {
        detail::readEpsilons(*map, reader.pathOf(key), diagnostics, o.epsilons);
      }
    } else if (const Json* fb = reader.value(key)) {
      detail::readFeedback(*fb, reader.pathOf(key), diagnostics, o.feedback);
    }
  });
  reader.finish();
  detail::warnDeprecated(reader, fields);
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
