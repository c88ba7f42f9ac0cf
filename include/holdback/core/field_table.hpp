// Field tables: one row per configuration key of a component's options struct, written once.
//
// A row names the key, binds it to a member of the options struct (bind<&Options::member>(), or a
// member path such as bind<&Options::smoothing, &DemandSmoothing::rise>()), and carries what every
// consumer of the key needs: how a file spells its value (the kind, the choices of an enum), the
// checks validate() runs on it (with their error wording), its meaning sentence, whether most
// files set it (common) or only the situation its meaning names (advanced), and the advice a
// deprecated key's warning gives. The component's validate() runs checkFields() over its table
// and keeps only the rules that involve several fields by hand; the config layer reads the keys,
// writes the effective configuration and exports the table from the same rows
// (config/detail/field_table.hpp). docs/design/architecture.md, "Config keys", says how to add
// a key.
//
// Thread safety: the tables are immutable constants; the functions are thread-safe.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/text.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// What a deprecated key's warning advises for a key that only switches a measured default off.
inline constexpr std::string_view kAblationSwitch =
    "remove it; an experiment switch whose default is the measured choice (the simulator keeps "
    "it for ablations)";

// How a file spells a key's value.
enum class FieldKind : std::uint8_t {
  kAuto,      // from the bound member's type (the ones below marked "bound")
  kNumber,    // bound: double, std::optional<double>
  kInteger,   // bound: an integer type (held as std::int64_t), read within [Field::min, Field::max]
  kCount,     // std::int64_t read as "an integer > 0" (validate reports values <= 0)
  kBoolean,   // bound: bool
  kDuration,  // bound: Duration, std::optional<Duration>; "a duration string such as "300ms""
  kGoDuration,    // Duration, with the detectors' wording ("200ms", "1.5s" or "2m"; the units)
  kChoice,        // bound: an enum, one of Field::choices
  kSeconds,       // Duration read and written as a number of seconds, read within [-1e9, 1e9]
  kQuantity,      // std::uint64_t: a Kubernetes quantity ("1Gi") or an integer, read as >= 0
                  // ("<label> must be non-negative")
  kFlowDuration,  // Duration, std::optional<Duration>: a Go duration string, read as >= 0
                  // ("<label> cannot be negative"), the flow controller's wording
  kStructured,    // read by hand (a priority map, a nested block, two spellings); a bound one is
                  // still checked and written from its binding, an unbound one by hand
};

enum class FieldUse : std::uint8_t { kCommon, kAdvanced };

struct ChoiceValue {
  int value = 0;
};

// A bound member's value; monostate for an empty optional.
using FieldValue = std::variant<std::monostate, double, std::int64_t, bool, Duration, ChoiceValue>;

// The number a check compares (a duration in nanoseconds, false/true as 0/1).
[[nodiscard]] HOLDBACK_API double fieldNumber(const FieldValue& value) noexcept;
// The value as messages show it: numbers as formatNumber, durations quoted ("\"-1s\"").
[[nodiscard]] HOLDBACK_API std::string fieldText(const FieldValue& value);

// How a failed check words its message.
enum class CheckForm : std::uint8_t {
  kOutside,       // "<value> is outside <interval>"
  kValue,         // "<value> <text>"
  kBare,          // "<text>"
  kIntegerRange,  // "<value> is out of range; expected an integer in <interval>"
  kUnquoted,      // "<value> <text>", a duration unquoted ("-1s must be >= 0")
};

namespace detail {
// A bound of an interval as written: "0", "-1.5", "100.0", "inf", "-inf".
constexpr double parseBound(std::string_view s) noexcept {
  const bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  double v = std::numeric_limits<double>::infinity();
  if (s != "inf") {
    double whole = 0.0;
    double fraction = 0.0;
    double scale = 1.0;
    bool after_point = false;
    for (const char c : s) {
      if (c == '.') {
        after_point = true;
      } else if (after_point) {
        fraction = fraction * 10.0 + (c - '0');
        scale *= 10.0;
      } else {
        whole = whole * 10.0 + (c - '0');
      }
    }
    v = whole + fraction / scale;
  }
  return negative ? -v : v;
}
}  // namespace detail

// One check of a field's value: the value must lie in the interval (written as the messages
// write it, "(0.0, 1.0]", "[0, inf)"); NaN lies in none.
struct FieldCheck {
  std::string_view interval{};  // empty: no check
  CheckForm form = CheckForm::kValue;
  std::string_view text{};
  Severity severity = Severity::kError;

  [[nodiscard]] constexpr bool accepts(double v) const noexcept {
    const std::size_t comma = interval.find(", ");
    const double lo = detail::parseBound(interval.substr(1, comma - 1));
    const double hi = detail::parseBound(interval.substr(comma + 2, interval.size() - comma - 3));
    const bool lo_ok = interval.front() == '(' ? v > lo : v >= lo;
    const bool hi_ok = interval.back() == ')' ? v < hi : v <= hi;
    return lo_ok && hi_ok;
  }
};

// "<value> is outside <interval>".
constexpr FieldCheck outside(std::string_view interval) noexcept {
  return {interval, CheckForm::kOutside, {}, Severity::kError};
}
// "<value> <text>" (kBare: "<text>") when the value is not in `interval`.
constexpr FieldCheck must(std::string_view interval, std::string_view text,
                          CheckForm form = CheckForm::kValue) noexcept {
  return {interval, form, text, Severity::kError};
}
// A warning "<value> <text>" when the value is not in `interval`.
constexpr FieldCheck warnUnless(std::string_view interval, std::string_view text) noexcept {
  return {interval, CheckForm::kValue, text, Severity::kWarning};
}
// "<value> is out of range; expected an integer in <interval>".
constexpr FieldCheck integerIn(std::string_view interval) noexcept {
  return {interval, CheckForm::kIntegerRange, {}, Severity::kError};
}

struct FieldChoice {
  std::string_view name{};
  int value = 0;
};

namespace detail {

template <class T>
struct MemberOwner;
template <class C, class M>
struct MemberOwner<M C::*> {
  using type = C;
};

template <class T>
constexpr T& follow(T& object) noexcept {
  return object;
}
template <class T, class Member, class... Rest>
constexpr auto& follow(T& object, Member member, Rest... rest) noexcept {
  return follow(object.*member, rest...);
}

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
constexpr FieldKind kindOf() noexcept {
  if constexpr (IsOptional<T>::value) {
    return kindOf<typename T::value_type>();
  } else if constexpr (std::is_same_v<T, bool>) {
    return FieldKind::kBoolean;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldKind::kNumber;
  } else if constexpr (std::is_integral_v<T>) {
    return FieldKind::kInteger;
  } else if constexpr (std::is_same_v<T, Duration>) {
    return FieldKind::kDuration;
  } else {
    static_assert(std::is_enum_v<T>,
                  "a field binds a double, an integer, bool, Duration or an enum");
    return FieldKind::kChoice;
  }
}

template <class T>
FieldValue toFieldValue(const T& v) {
  if constexpr (IsOptional<T>::value) {
    return v ? toFieldValue(*v) : FieldValue{};
  } else if constexpr (std::is_enum_v<T>) {
    return ChoiceValue{static_cast<int>(v)};
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return FieldValue{static_cast<std::int64_t>(v)};
  } else {
    return FieldValue{v};
  }
}

template <class T>
void fromFieldValue(T& out, const FieldValue& v) {
  if constexpr (IsOptional<T>::value) {
    typename T::value_type inner{};
    fromFieldValue(inner, v);
    out = inner;
  } else if constexpr (std::is_enum_v<T>) {
    if (const auto* c = std::get_if<ChoiceValue>(&v)) out = static_cast<T>(c->value);
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (const auto* x = std::get_if<std::int64_t>(&v)) out = static_cast<T>(*x);
  } else {
    if (const auto* x = std::get_if<T>(&v)) out = *x;
  }
}

}  // namespace detail

// How a row reaches its member: get returns the value (monostate for an empty optional), set
// stores one of the member's type. Unbound (structured) rows have neither.
template <class Options>
struct FieldBinding {
  FieldKind kind = FieldKind::kStructured;
  FieldValue (*get)(const Options&) = nullptr;
  void (*set)(Options&, const FieldValue&) = nullptr;
};

// The binding of the member reached through `Path` (member pointers, outermost first).
template <auto First, auto... Rest>
constexpr auto bind() noexcept {
  using Options = typename detail::MemberOwner<decltype(First)>::type;
  using T = std::remove_cvref_t<decltype(detail::follow(std::declval<Options&>(), First, Rest...))>;
  FieldBinding<Options> b;
  b.kind = detail::kindOf<T>();
  b.get = [](const Options& o) { return detail::toFieldValue(detail::follow(o, First, Rest...)); };
  b.set = [](Options& o, const FieldValue& v) {
    detail::fromFieldValue(detail::follow(o, First, Rest...), v);
  };
  return b;
}

// The names of an enum's values as a file spells them, in the order messages list them.
template <class Enum, std::size_t N>
constexpr std::array<FieldChoice, 6> choices(
    const std::pair<std::string_view, Enum> (&named)[N]) noexcept {
  static_assert(N <= 6, "at most six choices");
  std::array<FieldChoice, 6> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = {named[i].first, static_cast<int>(named[i].second)};
  return out;
}

// One configuration key of `Options`. Every member has a default initializer, so a row names
// only the members it sets (designated initializers; a consumer's -Wmissing-field-initializers
// has nothing to report).
template <class Options>
struct Field {
  std::string_view key{};
  FieldBinding<Options> bind{};
  FieldUse use = FieldUse::kAdvanced;
  // One sentence: what the key does and why a user sets it (docs/reference/configuration.md).
  std::string_view meaning{};
  // Run in order; the first that fails is reported and the rest are skipped.
  std::array<FieldCheck, 3> checks{};
  // How a file spells the value; kAuto: from the binding.
  FieldKind kind = FieldKind::kAuto;
  std::array<FieldChoice, 6> choices{};
  // kQuantity, kFlowDuration: the field's name in the reader's messages (after the prefix
  // readFields is given: "priority band 5 " + "MaxBytes").
  std::string_view label{};
  // Not empty: the key the effective configuration writes the row under (a reference written as
  // the plugin it resolves to).
  std::string_view writtenAs{};
  // kInteger: the range the reader accepts.
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  // Not empty: the key is deprecated (still read and applied, with a warning); what to do now.
  std::string_view deprecated{};
  // Checked, and written to the effective configuration, only when this holds (null: always).
  bool (*when)(const Options&) = nullptr;
  // Written to the effective configuration even when `when` does not hold.
  bool alwaysWritten = false;
  // Written by hand (writeFields' callback), though read from its binding: a value the options
  // may leave unset that the effective configuration shows resolved.
  bool writtenByHand = false;
  // Not empty: this row's checks run just before the row of this key's (a bound that a later
  // row's rule reads is reported first), not at its own place.
  std::string_view checkedBefore{};
  // Not empty: readFields reads this row just before the row of this key, not at its place (a
  // file's errors keep the order the loader always reported them in; the table's order is the
  // effective configuration's).
  std::string_view readBefore{};

  [[nodiscard]] constexpr FieldKind readKind() const noexcept {
    return kind != FieldKind::kAuto ? kind : bind.kind;
  }
  [[nodiscard]] constexpr bool applies(const Options& o) const noexcept {
    return when == nullptr || when(o);
  }
};

template <class Options>
using FieldTable = std::span<const Field<Options>>;

// The row of `key`, or null.
template <class Options>
const Field<Options>* findField(FieldTable<Options> table, std::string_view key) noexcept {
  for (const Field<Options>& f : table) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

// Appends the failure of `check` for `value` at `at`.
HOLDBACK_API void reportFieldCheck(const FieldCheck& check, const FieldValue& value,
                                   const std::string& at, Diagnostics& diagnostics);

// The first check of `field` that rejects `value`, or null.
template <class Options>
const FieldCheck* failedCheck(const Field<Options>& field, const FieldValue& value) noexcept {
  if (std::holds_alternative<std::monostate>(value)) return nullptr;
  const double x = fieldNumber(value);
  for (const FieldCheck& c : field.checks) {
    if (c.interval.empty()) break;
    if (!c.accepts(x)) return &c;
  }
  return nullptr;
}

// Runs every bound row's checks (where the row applies) in table order; `path` is the JSON
// pointer of the parameters object.
template <class Options>
void checkFields(FieldTable<Options> table, const Options& options, const std::string& path,
                 Diagnostics& diagnostics) {
  const auto check = [&](const Field<Options>& f) {
    if (f.bind.get == nullptr || !f.applies(options)) return;
    const FieldValue value = f.bind.get(options);
    if (const FieldCheck* c = failedCheck(f, value)) {
      reportFieldCheck(*c, value, joinPath(path, f.key), diagnostics);
    }
  };
  for (const Field<Options>& f : table) {
    for (const Field<Options>& early : table) {
      if (early.checkedBefore == f.key) check(early);
    }
    if (f.checkedBefore.empty()) check(f);
  }
}

// True when no error check of the row `key` rejects its value (for rules across fields that
// apply only to values valid on their own).
template <class Options>
bool fieldValid(FieldTable<Options> table, std::string_view key, const Options& options) noexcept {
  const Field<Options>* f = findField(table, key);
  if (f == nullptr || f->bind.get == nullptr) return true;
  const FieldCheck* c = failedCheck(*f, f->bind.get(options));
  return c == nullptr || c->severity != Severity::kError;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/core/field_table-inl.hpp"
#endif
