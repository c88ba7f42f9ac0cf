// Implementation of holdback/config/detail/field_table.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/config/detail/field_table.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "holdback/config/quantity.hpp"
#include "holdback/core/duration.hpp"
#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

HOLDBACK_INLINE std::optional<Duration> durationField(ParamReader& reader, std::string_view key) {
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  const auto parsed = v->is_string() ? parseDuration(v->get<std::string>()) : std::nullopt;
  if (!parsed) reader.error(key, mismatch(*v, R"(a duration string such as "300ms" or "5s")"));
  return parsed;
}

HOLDBACK_INLINE std::optional<Duration> readDuration(ParamReader& reader, std::string_view key) {
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  constexpr std::string_view kExample = R"("200ms", "1.5s" or "2m")";
  if (!v->is_string()) {
    reader.error(key, mismatch(*v, "a duration string such as " + std::string(kExample)));
    return std::nullopt;
  }
  const auto duration = parseDuration(v->get<std::string>());
  if (!duration) {
    reader.error(key, describe(*v) + " is not a duration; expected a string such as " +
                          std::string(kExample) + " (units ns, us, ms, s, m, h)");
  }
  return duration;
}

HOLDBACK_INLINE std::optional<std::int64_t> readCount(ParamReader& reader, std::string_view key) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const Json* v = reader.value(key);
  if (v == nullptr) return std::nullopt;
  constexpr std::string_view kAllowed = "an integer > 0";
  const std::string range = "; expected an integer in [1, " + std::to_string(kMax) + "]";
  if (!v->is_number()) {
    reader.error(key, mismatch(*v, kAllowed));
    return std::nullopt;
  }
  if (v->is_number_unsigned()) {
    const std::uint64_t u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(kMax)) {
      reader.error(key, describe(*v) + " is too large" + range);
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<std::int64_t>();
  const double d = v->get<double>();
  if (std::trunc(d) != d) {
    reader.error(key, describe(*v) + " is not a whole number; expected " + std::string(kAllowed));
    return std::nullopt;
  }
  // 2^63 and beyond do not fit; below -2^63 neither (and are not positive anyway).
  if (d >= 9223372036854775808.0) {
    reader.error(key, describe(*v) + " is too large" + range);
    return std::nullopt;
  }
  if (d < -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(d);
}

HOLDBACK_INLINE std::optional<Duration> secondsField(ParamReader& reader, std::string_view key) {
  const auto v = reader.number(key);
  if (!v) return std::nullopt;
  if (!(*v >= -1e9 && *v <= 1e9)) {
    reader.error(key, formatNumber(*v) + " is not a number of seconds in [0, 1e9]");
    return std::nullopt;
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(*v));
}

HOLDBACK_INLINE std::optional<std::uint64_t> quantityField(ParamReader& reader,
                                                           std::string_view key,
                                                           std::string_view label) {
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
    reader.error(key, std::string(label) + " must be non-negative, got " + std::to_string(*n));
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(*n);
}

HOLDBACK_INLINE std::optional<Duration> flowDurationField(ParamReader& reader, std::string_view key,
                                                          std::string_view label) {
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
    reader.error(key, std::string(label) + " cannot be negative, but got " + v->get<std::string>());
    return std::nullopt;
  }
  return d;
}

HOLDBACK_INLINE std::optional<int> readChoice(ParamReader& reader, std::string_view key,
                                              const std::array<FieldChoice, 6>& choices) {
  std::vector<std::string_view> names;
  for (const FieldChoice& c : choices) {
    if (!c.name.empty()) names.push_back(c.name);
  }
  const auto name = reader.oneOf(key, names);
  if (!name) return std::nullopt;
  for (const FieldChoice& c : choices) {
    if (c.name == *name) return c.value;
  }
  return std::nullopt;
}

HOLDBACK_INLINE FieldValue readFieldValue(ParamReader& reader, FieldKind kind, std::string_view key,
                                          const std::array<FieldChoice, 6>& choices,
                                          std::int64_t min, std::int64_t max,
                                          std::string_view label) {
  const auto as = [](const auto& v) { return v ? FieldValue{*v} : FieldValue{}; };
  switch (kind) {
    case FieldKind::kNumber:
      return as(reader.number(key));
    case FieldKind::kInteger:
      return as(reader.integer(key, min, max));
    case FieldKind::kCount:
      return as(readCount(reader, key));
    case FieldKind::kBoolean:
      return as(reader.boolean(key));
    case FieldKind::kDuration:
      return as(durationField(reader, key));
    case FieldKind::kGoDuration:
      return as(readDuration(reader, key));
    case FieldKind::kSeconds:
      return as(secondsField(reader, key));
    case FieldKind::kQuantity: {
      const auto v = quantityField(reader, key, label);
      return v ? FieldValue{static_cast<std::int64_t>(*v)} : FieldValue{};
    }
    case FieldKind::kFlowDuration:
      return as(flowDurationField(reader, key, label));
    case FieldKind::kChoice: {
      const auto v = readChoice(reader, key, choices);
      return v ? FieldValue{ChoiceValue{*v}} : FieldValue{};
    }
    case FieldKind::kAuto:
    case FieldKind::kStructured:
      break;
  }
  return {};
}

HOLDBACK_INLINE nlohmann::ordered_json fieldJson(const FieldValue& value, FieldKind kind,
                                                 const std::array<FieldChoice, 6>& choices) {
  if (const auto* t = std::get_if<Duration>(&value); t != nullptr && kind == FieldKind::kSeconds) {
    return std::chrono::duration<double>(*t).count();
  }
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  if (const auto* t = std::get_if<Duration>(&value)) return formatDuration(*t);
  if (const auto* c = std::get_if<ChoiceValue>(&value)) {
    for (const FieldChoice& choice : choices) {
      if (!choice.name.empty() && choice.value == c->value) return std::string(choice.name);
    }
  }
  return nullptr;
}

HOLDBACK_INLINE std::string_view fieldKindName(FieldKind kind) noexcept {
  switch (kind) {
    case FieldKind::kNumber:
      return "number";
    case FieldKind::kInteger:
    case FieldKind::kCount:
      return "integer";
    case FieldKind::kQuantity:
      return "quantity";
    case FieldKind::kSeconds:
      return "seconds";
    case FieldKind::kBoolean:
      return "boolean";
    case FieldKind::kDuration:
    case FieldKind::kGoDuration:
    case FieldKind::kFlowDuration:
      return "duration";
    case FieldKind::kChoice:
      return "choice";
    case FieldKind::kAuto:
    case FieldKind::kStructured:
      break;
  }
  return "structured";
}

HOLDBACK_INLINE nlohmann::ordered_json fieldSchemaRow(std::string_view key, FieldKind kind,
                                                      FieldUse use, std::string_view meaning,
                                                      const std::array<FieldCheck, 3>& checks,
                                                      const std::array<FieldChoice, 6>& choices,
                                                      std::string_view deprecated,
                                                      const nlohmann::ordered_json& defaults) {
  nlohmann::ordered_json row = nlohmann::ordered_json::object();
  row["key"] = std::string(key);
  row["kind"] = std::string(fieldKindName(kind));
  row["use"] = use == FieldUse::kCommon ? "common" : "advanced";
  if (const auto it = defaults.find(key); it != defaults.end()) row["default"] = *it;
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (const FieldChoice& c : choices) {
    if (!c.name.empty()) names.push_back(std::string(c.name));
  }
  if (!names.empty()) row["choices"] = std::move(names);
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (const FieldCheck& c : checks) {
    if (c.interval.empty()) break;
    nlohmann::ordered_json rule = {
        {"interval", std::string(c.interval)},
        {"severity", c.severity == Severity::kError ? "error" : "warning"}};
    if (!c.text.empty()) rule["message"] = std::string(c.text);
    rules.push_back(std::move(rule));
  }
  if (!rules.empty()) row["checks"] = std::move(rules);
  if (!meaning.empty()) row["meaning"] = std::string(meaning);
  if (!deprecated.empty()) row["deprecated"] = std::string(deprecated);
  return row;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
