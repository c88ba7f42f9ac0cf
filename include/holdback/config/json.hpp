// Strict JSON reading for configuration: parsing with paths, and typed parameter access that
// reports every problem at once.
//
// parseJson() is stricter than nlohmann::json::parse: a duplicate key in an object is an error
// (nlohmann would keep the last one silently), numbers that overflow a double ("1e400") are
// errors, and syntax errors carry the line, column and JSON path where they occurred. It never
// throws.
//
// ParamReader reads one JSON object (a plugin's "parameters", say) field by field. Each accessor
// checks the JSON type and range, records a Diagnostic naming the JSON path, the value found and
// what is allowed, and marks the key as known; finish() then reports every key nobody asked for.
//
// Thread safety: thread-compatible.
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "holdback/core/diagnostics.hpp"
#include "holdback/core/field_table.hpp"
#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

using Json = nlohmann::json;

// Parses `text` as one JSON document (no comments, no trailing commas). A syntax error (or a
// number that overflows a double) leaves no value. Duplicate keys are errors too, but the
// document is still returned (the later value kept) so that a caller can go on and report every
// other problem as well: check diagnostics().hasErrors(), not only ok().
HOLDBACK_API Result<Json> parseJson(std::string_view text);

// joinPath and formatNumber live in holdback/core/text.hpp (every layer's messages use them);
// config:: keeps the names.
using holdback::formatNumber;
using holdback::joinPath;

// A short description of a JSON value for messages: numbers and booleans as written, strings
// quoted (long ones cut), and "an object", "an array", "null" otherwise.
HOLDBACK_API std::string describe(const Json& value);

// The JSON type in words: "a number", "a string", ...
HOLDBACK_API std::string_view typeName(const Json& value);

// A type-mismatch message: "\"0.5\" is a string; expected a number", or for containers and
// null "found an array; expected an object".
HOLDBACK_API std::string mismatch(const Json& value, std::string_view expected);

// Parses a whole decimal integer string (optional leading '-') into [min, max]. Used for
// integer-string map keys such as "-10". Returns nullopt on anything else.
HOLDBACK_API std::optional<std::int64_t> parseIntegerKey(std::string_view text, std::int64_t min,
                                                         std::int64_t max);

// What ParamReader::deprecated says about a key that only switches a measured default off
// (core/field_table.hpp).
using holdback::kAblationSwitch;

class HOLDBACK_API ParamReader {
 public:
  // `object` may be null: the parameters were absent, and every key reads as absent. A non-null
  // value that is not an object is reported at `path` and then also reads as empty.
  ParamReader(const Json* object, std::string path, Diagnostics& diagnostics);

  // False when the value given was not an object (already reported).
  [[nodiscard]] bool valid() const noexcept { return object_ != nullptr || !given_; }
  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::string pathOf(std::string_view key) const { return joinPath(path_, key); }
  [[nodiscard]] Diagnostics& diagnostics() const noexcept { return diagnostics_; }

  // Each accessor marks `key` as known. It returns nullopt when the key is absent or its value is
  // invalid (an error has then been recorded).
  std::optional<double> number(std::string_view key);
  // Integers must be JSON integers, or floats with an integral value, within [min, max]; nothing
  // is wrapped, truncated or clamped.
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::optional<bool> boolean(std::string_view key);
  std::optional<std::string> string(std::string_view key);
  // A string that must be one of `allowed`.
  std::optional<std::string> oneOf(std::string_view key,
                                   std::initializer_list<std::string_view> allowed);
  std::optional<std::string> oneOf(std::string_view key, std::span<const std::string_view> allowed);
  // The raw value (any type), or null when absent.
  const Json* value(std::string_view key);

  // Marks `key` known without reading it.
  void accept(std::string_view key);
  // Records "<path>/<key>: <message>".
  void error(std::string_view key, const std::string& message) const;
  // When `key` is present, warns that it is deprecated: the key still loads and its value still
  // applies; `instead` says what a file should do now (docs/reference/configuration.md lists
  // every deprecated key). Marks nothing known: the key is read as before.
  void deprecated(std::string_view key, std::string_view instead) const;

  // Reports each key present but never read or accepted, listing the known keys.
  void finish();

 private:
  const Json* find(std::string_view key) const;

  const Json* object_ = nullptr;
  bool given_ = false;
  std::string path_;
  Diagnostics& diagnostics_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/json-inl.hpp"
#endif
