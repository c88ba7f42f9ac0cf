// Implementation of holdback/config/json.hpp: compiled into libholdback by src/config.cpp, or
// included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/json.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

// Builds a Json value from nlohmann's SAX events while tracking the JSON path, so that duplicate
// keys and syntax errors can be reported where they occur.
class StrictBuilder {
 public:
  explicit StrictBuilder(std::string_view text, Diagnostics& diagnostics)
      : text_(text), diagnostics_(diagnostics) {}

  Json& root() { return root_; }

  bool null() { return addValue(Json(nullptr)); }
  bool boolean(bool v) { return addValue(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return addValue(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return addValue(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
    return addValue(Json(v));
  }
  bool string(Json::string_t& v) { return addValue(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return addValue(Json::binary(std::move(v))); }

  bool start_object(std::size_t /*elements*/) {
    if (!deeper()) return false;
    Json* container = place(Json::object());
    frames_.push_back(Frame{container, {}});
    return true;
  }
  bool key(Json::string_t& k) {
    Frame& frame = frames_.back();
    if (frame.container->contains(k)) {
      diagnostics_.error(joinPath(containerPath(), k),
                         "duplicate key \"" + k +
                             "\": a key may appear only once in an object (a second value would "
                             "silently replace the first)");
    }
    frame.key = std::move(k);
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    if (!deeper()) return false;
    Json* container = place(Json::array());
    frames_.push_back(Frame{container, {}});
    return true;
  }
  bool end_array() {
    frames_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const Json::exception& ex) {
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag and its own position prefix: the
    // diagnostic carries line and column itself.
    if (const auto close = what.find("] "); what.rfind('[', 0) == 0 && close != std::string::npos) {
      what.erase(0, close + 2);
    }
    if (what.rfind("parse error at line", 0) == 0) {
      if (const auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
    }
    int line = 1;
    int column = 1;
    // `position` counts the characters read, the offending one included: report that one.
    const std::size_t read = position < text_.size() ? position : text_.size();
    const std::size_t end = read > 0 ? read - 1 : 0;
    for (std::size_t i = 0; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    diagnostics_.error(currentPath(), "invalid JSON: " + what, line, column);
    return false;
  }

 private:
  struct Frame {
    Json* container;
    std::string key;  // objects: the key of the value being read
  };

  // A document nested more than kMaxJsonNesting levels is refused (later passes over it recurse).
  bool deeper() {
    if (frames_.size() < kMaxJsonNesting) return true;
    diagnostics_.error(currentPath(), "nesting deeper than " + std::to_string(kMaxJsonNesting) +
                                          " levels (arrays and objects)");
    return false;
  }

  bool addValue(Json&& v) {
    place(std::move(v));
    return true;
  }

  // Stores `v` at the current position and returns where it lives.
  Json* place(Json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& container = *frames_.back().container;
    if (container.is_array()) {
      container.push_back(std::move(v));
      return &container.back();
    }
    Json& slot = container[frames_.back().key];
    slot = std::move(v);
    return &slot;
  }

  // The path of the value being read: each object frame contributes its current key, each array
  // frame the index of the element being read (a nested container is already in the array).
  std::string currentPath() const { return pathOf(frames_.size()); }
  // The path of the innermost container itself.
  std::string containerPath() const { return pathOf(frames_.size() - 1); }

  std::string pathOf(std::size_t depth) const {
    std::string path;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& frame = frames_[i];
      if (frame.container->is_array()) {
        const std::size_t size = frame.container->size();
        path += "/" + std::to_string(i + 1 < frames_.size() ? size - 1 : size);
      } else {
        path = joinPath(path, frame.key);
      }
    }
    return path;
  }

  std::string_view text_;
  Diagnostics& diagnostics_;
  Json root_;
  std::vector<Frame> frames_;
};

}  // namespace detail

namespace config {

HOLDBACK_INLINE Result<Json> parseJson(std::string_view text) {
  Diagnostics diagnostics;
  detail::StrictBuilder builder(text, diagnostics);
  const bool complete =
      Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                      /*strict=*/true, /*ignore_comments=*/false);
  if (!complete) return Result<Json>::failure(std::move(diagnostics));
  return Result<Json>(std::move(builder.root()), std::move(diagnostics));
}

HOLDBACK_INLINE std::string_view typeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "a value of unsupported type";
  }
}

HOLDBACK_INLINE std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer:
      return std::to_string(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<std::uint64_t>());
    case Json::value_t::number_float:
      return formatNumber(value.get<double>());
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return "\"" + s + "\"";
    }
    default:
      return std::string(typeName(value));
  }
}

HOLDBACK_INLINE std::string mismatch(const Json& value, std::string_view expected) {
  const std::string found = value.is_object() || value.is_array() || value.is_null()
                                ? "found " + std::string(typeName(value))
                                : describe(value) + " is " + std::string(typeName(value));
  return found + "; expected " + std::string(expected);
}

HOLDBACK_INLINE std::optional<std::int64_t> parseIntegerKey(std::string_view text, std::int64_t min,
                                                            std::int64_t max) {
  std::int64_t out = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (text.empty() || ec != std::errc() || ptr != last || out < min || out > max) {
    return std::nullopt;
  }
  return out;
}

HOLDBACK_INLINE ParamReader::ParamReader(const Json* object, std::string path,
                                         Diagnostics& diagnostics)
    : object_(object),
      given_(object != nullptr),
      path_(std::move(path)),
      diagnostics_(diagnostics) {
  if (object_ != nullptr && !object_->is_object()) {
    diagnostics_.error(path_, mismatch(*object_, "an object"));
    object_ = nullptr;
  }
}

HOLDBACK_INLINE const Json* ParamReader::find(std::string_view key) const {
  if (object_ == nullptr) return nullptr;
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

HOLDBACK_INLINE bool ParamReader::has(std::string_view key) const {
  return find(key) != nullptr;
}

HOLDBACK_INLINE void ParamReader::accept(std::string_view key) {
  known_.emplace(key);
}

HOLDBACK_INLINE void ParamReader::error(std::string_view key, const std::string& message) const {
  diagnostics_.error(pathOf(key), message);
}

HOLDBACK_INLINE void ParamReader::deprecated(std::string_view key, std::string_view instead) const {
  if (!has(key)) return;
  diagnostics_.warning(pathOf(key),
                       "deprecated (not a documented key any more; the value still "
                       "applies): " +
                           std::string(instead));
}

HOLDBACK_INLINE const Json* ParamReader::value(std::string_view key) {
  accept(key);
  return find(key);
}

HOLDBACK_INLINE std::optional<double> ParamReader::number(std::string_view key) {
  const Json* v = value(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    error(key, mismatch(*v, "a number"));
    return std::nullopt;
  }
  return v->get<double>();
}

HOLDBACK_INLINE std::optional<std::int64_t> ParamReader::integer(std::string_view key,
                                                                 std::int64_t min,
                                                                 std::int64_t max) {
  const Json* v = value(key);
  if (v == nullptr) return std::nullopt;
  const std::string allowed =
      "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (v->is_number_unsigned()) {
    const std::uint64_t u = v->get<std::uint64_t>();
    if (max < 0 || u > static_cast<std::uint64_t>(max) ||
        (min > 0 && u < static_cast<std::uint64_t>(min))) {
      error(key, describe(*v) + " is out of range; " + allowed);
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (v->is_number_integer()) {
    const std::int64_t i = v->get<std::int64_t>();
    if (i < min || i > max) {
      error(key, describe(*v) + " is out of range; " + allowed);
      return std::nullopt;
    }
    return i;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::trunc(d) != d) {
      error(key, describe(*v) + " is not a whole number; " + allowed);
      return std::nullopt;
    }
    if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
      error(key, describe(*v) + " is out of range; " + allowed);
      return std::nullopt;
    }
    return static_cast<std::int64_t>(d);
  }
  error(key, mismatch(*v, allowed.substr(9)));
  return std::nullopt;
}

HOLDBACK_INLINE std::optional<bool> ParamReader::boolean(std::string_view key) {
  const Json* v = value(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    error(key, mismatch(*v, "true or false"));
    return std::nullopt;
  }
  return v->get<bool>();
}

HOLDBACK_INLINE std::optional<std::string> ParamReader::string(std::string_view key) {
  const Json* v = value(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    error(key, mismatch(*v, "a string"));
    return std::nullopt;
  }
  return v->get<std::string>();
}

HOLDBACK_INLINE std::optional<std::string> ParamReader::oneOf(
    std::string_view key, std::initializer_list<std::string_view> allowed) {
  return oneOf(key, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}

HOLDBACK_INLINE std::optional<std::string> ParamReader::oneOf(
    std::string_view key, std::span<const std::string_view> allowed) {
  std::string list;
  for (const std::string_view a : allowed) {
    if (!list.empty()) list += ", ";
    list += "\"" + std::string(a) + "\"";
  }
  const Json* v = find(key);
  if (v != nullptr && !v->is_string()) {
    accept(key);
    error(key, mismatch(*v, "one of " + list));
    return std::nullopt;
  }
  std::optional<std::string> s = string(key);
  if (!s) return std::nullopt;
  for (const std::string_view a : allowed) {
    if (*s == a) return s;
  }
  error(key, describe(*v) + " is not supported; expected one of " + list);
  return std::nullopt;
}

HOLDBACK_INLINE void ParamReader::finish() {
  if (object_ == nullptr) return;
  std::string list;
  for (const std::string& k : known_) {
    if (!list.empty()) list += ", ";
    list += k;
  }
  for (const auto& [key, v] : object_->items()) {
    if (known_.find(key) == known_.end()) {
      error(key,
            "unknown key \"" + key + "\"; " +
                (list.empty() ? std::string("no keys are allowed here") : "allowed keys: " + list));
    }
  }
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
