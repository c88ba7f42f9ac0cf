// The config layer's half of the field tables (core/field_table.hpp): reading a table's keys from
// a parameters object, writing them into the effective configuration, and exporting the table
// (`holdback validate --schema`, which docs/reference/configuration.md takes its meaning and use
// columns from). Internal.
//
// Thread safety: thread-compatible (each call works on its own reader and options).
// Allocation: yes; config loading is a cold path.
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "holdback/config/json.hpp"
#include "holdback/core/field_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The readers of the kinds ParamReader has no accessor for. Each marks the key known, returns
// nullopt when it is absent or unreadable (reported).
// kDuration: "a duration string such as "300ms" or "5s"".
std::optional<Duration> durationField(config::ParamReader& reader, std::string_view key);
// kGoDuration: the detectors' wording (the units listed when the string is no duration).
std::optional<Duration> readDuration(config::ParamReader& reader, std::string_view key);
// kCount: an integer that validation will require to be > 0. Returns the value even when it is
// not positive (validate() then reports it).
std::optional<std::int64_t> readCount(config::ParamReader& reader, std::string_view key);
// kSeconds: a number of seconds in [-1e9, 1e9] (a negative one is returned; validate() reports it).
std::optional<Duration> secondsField(config::ParamReader& reader, std::string_view key);
// kQuantity: a Kubernetes quantity ("1Gi") or an integer, >= 0; `label` names the field in the
// negative-value message ("global MaxBytes must be non-negative, got -1"), as the reference does.
std::optional<std::uint64_t> quantityField(config::ParamReader& reader, std::string_view key,
                                           std::string_view label);
// kFlowDuration: a Go duration string, >= 0 ("<label> cannot be negative, but got -1s").
std::optional<Duration> flowDurationField(config::ParamReader& reader, std::string_view key,
                                          std::string_view label);
// kChoice: the value of the choice the string names.
std::optional<int> readChoice(config::ParamReader& reader, std::string_view key,
                              const std::array<FieldChoice, 6>& choices);

// One value of a row, read as its kind says (nothing for kStructured); `label` names the field in
// the messages of kQuantity and kFlowDuration.
FieldValue readFieldValue(config::ParamReader& reader, FieldKind kind, std::string_view key,
                          const std::array<FieldChoice, 6>& choices, std::int64_t min,
                          std::int64_t max, std::string_view label);

// A value as the effective configuration writes it: durations as Go strings (kSeconds: a number
// of seconds), choices by name, an empty optional as null.
nlohmann::ordered_json fieldJson(const FieldValue& value, FieldKind kind,
                                 const std::array<FieldChoice, 6>& choices);

// One row's description for the schema export: key, kind, use, default (from `defaults`, the
// effective parameters of default options, when it has the key), choices, checks, meaning,
// deprecated.
nlohmann::ordered_json fieldSchemaRow(std::string_view key, FieldKind kind, FieldUse use,
                                      std::string_view meaning,
                                      const std::array<FieldCheck, 3>& checks,
                                      const std::array<FieldChoice, 6>& choices,
                                      std::string_view deprecated,
                                      const nlohmann::ordered_json& defaults);

// Reads every row of `table` in order (a row with `readBefore` just before that row) into
// `options`: bound rows by their kind, kStructured rows through readByHand(key, options).
// `labelPrefix` goes before each row's label in the readers' messages ("priority band 5 ").
template <class Options, class ReadByHand>
void readFields(config::ParamReader& reader, FieldTable<Options> table, Options& options,
                ReadByHand readByHand, std::string_view labelPrefix = {}) {
  const auto read = [&](const Field<Options>& f) {
    if (f.readKind() == FieldKind::kStructured) {
      readByHand(f.key, options);
      return;
    }
    const std::string label = std::string(labelPrefix) + std::string(f.label);
    const FieldValue v =
        readFieldValue(reader, f.readKind(), f.key, f.choices, f.min, f.max, label);
    if (!std::holds_alternative<std::monostate>(v)) f.bind.set(options, v);
  };
  for (const Field<Options>& f : table) {
    for (const Field<Options>& early : table) {
      if (early.readBefore == f.key) read(early);
    }
    if (f.readBefore.empty()) read(f);
  }
}

// Warns about every deprecated key of `table` that the object sets (after reader.finish()), in
// the order checkFields() checks the rows (a row with `checkedBefore` just before that row).
template <class Options>
void warnDeprecated(const config::ParamReader& reader, FieldTable<Options> table) {
  const auto warn = [&](const Field<Options>& f) {
    if (!f.deprecated.empty()) reader.deprecated(f.key, f.deprecated);
  };
  for (const Field<Options>& f : table) {
    for (const Field<Options>& early : table) {
      if (early.checkedBefore == f.key) warn(early);
    }
    if (f.checkedBefore.empty()) warn(f);
  }
}

// The effective parameters: every row that applies (or is always written), in table order;
// kStructured and writtenByHand rows through writeByHand(key, options), which returns a discarded
// value to have a bound row written from its binding. A row goes under its writtenAs key if it
// has one.
template <class Options, class WriteByHand>
nlohmann::ordered_json writeFields(FieldTable<Options> table, const Options& options,
                                   WriteByHand writeByHand) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const Field<Options>& f : table) {
    if (!f.applies(options) && !f.alwaysWritten) continue;
    const std::string key(f.writtenAs.empty() ? f.key : f.writtenAs);
    if (f.readKind() == FieldKind::kStructured || f.writtenByHand) {
      nlohmann::ordered_json by_hand = writeByHand(f.key, options);
      if (!by_hand.is_discarded() || f.bind.get == nullptr) {
        out[key] = std::move(by_hand);
        continue;
      }
    }
    out[key] = fieldJson(f.bind.get(options), f.readKind(), f.choices);
  }
  return out;
}

// The effective parameters of a table with no rows written by hand (a structured row is null).
template <class Options>
nlohmann::ordered_json writeFields(FieldTable<Options> table, const Options& options) {
  return writeFields(table, options,
                     [](std::string_view, const Options&) { return nlohmann::ordered_json(); });
}

// The table as the schema export lists it; `defaults` are the effective parameters of default
// options; `prefix` goes before every key (a block's rows in its section: "dispatchLedger.").
template <class Options>
nlohmann::ordered_json fieldsSchema(FieldTable<Options> table,
                                    const nlohmann::ordered_json& defaults,
                                    std::string_view prefix = {}) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Field<Options>& f : table) {
    const FieldKind kind = f.readKind() == FieldKind::kStructured && f.bind.get != nullptr
                               ? f.bind.kind
                               : f.readKind();
    out.push_back(
        fieldSchemaRow(f.key, kind, f.use, f.meaning, f.checks, f.choices, f.deprecated, defaults));
    if (!prefix.empty()) out.back()["key"] = std::string(prefix) + std::string(f.key);
  }
  return out;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/detail/field_table-inl.hpp"
#endif
