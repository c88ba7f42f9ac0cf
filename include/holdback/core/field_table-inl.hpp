// Implementation of holdback/core/field_table.hpp: compiled into libholdback by src/core.cpp, or
// included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/core/field_table.hpp"

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE double fieldNumber(const FieldValue& value) noexcept {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? 1.0 : 0.0;
  if (const auto* t = std::get_if<Duration>(&value)) return static_cast<double>(t->count());
  if (const auto* c = std::get_if<ChoiceValue>(&value)) return c->value;
  return 0.0;
}

HOLDBACK_INLINE std::string fieldText(const FieldValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return formatNumber(*d);
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* t = std::get_if<Duration>(&value)) return "\"" + formatDuration(*t) + "\"";
  if (const auto* c = std::get_if<ChoiceValue>(&value)) return std::to_string(c->value);
  return "null";
}

HOLDBACK_INLINE void reportFieldCheck(const FieldCheck& check, const FieldValue& value,
                                      const std::string& at, Diagnostics& diagnostics) {
  // fieldText with a duration unquoted.
  const auto unquoted = [&] {
    if (const auto* t = std::get_if<Duration>(&value)) return formatDuration(*t);
    return fieldText(value);
  };
  std::string message;
  switch (check.form) {
    case CheckForm::kOutside:
      message = fieldText(value) + " is outside " + std::string(check.interval);
      break;
    case CheckForm::kValue:
      message = fieldText(value) + " " + std::string(check.text);
      break;
    case CheckForm::kBare:
      message = std::string(check.text);
      break;
    case CheckForm::kUnquoted:
      message = unquoted() + " " + std::string(check.text);
      break;
    case CheckForm::kIntegerRange:
      message = fieldText(value) + " is out of range; expected an integer in " +
                std::string(check.interval);
      break;
  }
  if (check.severity == Severity::kWarning) {
    diagnostics.warning(at, std::move(message));
  } else {
    diagnostics.error(at, std::move(message));
  }
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
