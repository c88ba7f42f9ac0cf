// Implementation of holdback/config/document.hpp: compiled into libholdback by
// src/config/document.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/document.hpp"

#include <yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

inline constexpr int kMaxDepth = 128;
inline constexpr std::size_t kMaxNodes = 1'000'000;

HOLDBACK_INLINE bool isNullScalar(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// YAML 1.2 core schema numbers, decimal only. Hand-written rather than std::regex, whose
// libstdc++ implementation recurses per character and can overflow the stack on long scalars.

HOLDBACK_INLINE std::size_t skipSign(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
}

HOLDBACK_INLINE std::size_t skipDigits(std::string_view s, std::size_t i) {
  while (i < s.size() && isDigit(s[i])) ++i;
  return i;
}

// [-+]?[0-9]+
HOLDBACK_INLINE bool isInteger(std::string_view s) {
  const std::size_t start = skipSign(s);
  const std::size_t end = skipDigits(s, start);
  return end > start && end == s.size();
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
HOLDBACK_INLINE bool isFloat(std::string_view s) {
  std::size_t i = skipSign(s);
  const std::size_t int_start = i;
  i = skipDigits(s, i);
  const bool int_digits = i > int_start;
  bool frac_digits = false;
  if (i < s.size() && s[i] == '.') {
    const std::size_t frac_start = ++i;
    i = skipDigits(s, i);
    frac_digits = i > frac_start;
  }
  if (!int_digits && !frac_digits) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const std::size_t exp_start = i;
    i = skipDigits(s, i);
    if (i == exp_start) return false;
  }
  return i == s.size();
}

// [-+]?\.(inf|Inf|INF) | \.(nan|NaN|NAN)
HOLDBACK_INLINE bool isSpecialFloat(std::string_view s) {
  const std::string_view body = s.substr(skipSign(s));
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  return s == ".nan" || s == ".NaN" || s == ".NAN";
}

// Builds Json from libyaml's event stream, keeping a source position for every value.
class YamlBuilder {
 public:
  YamlBuilder(Diagnostics& diagnostics, SourceMap& positions)
      : diagnostics_(diagnostics), positions_(positions) {}

  // Returns false when building must stop (an error has been recorded).
  bool handle(const yaml_event_t& event) {
    const SourcePosition at{static_cast<int>(event.start_mark.line) + 1,
                            static_cast<int>(event.start_mark.column) + 1};
    switch (event.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents_ > 1) {
          diagnostics_.error("", "the file holds more than one YAML document; expected one",
                             at.line, at.column);
          return false;
        }
        return true;
      case YAML_SCALAR_EVENT: {
        const auto& scalar = event.data.scalar;
        const std::string text(reinterpret_cast<const char*>(scalar.value), scalar.length);
        if (expectingKey()) return takeKey(text, at);
        const char* tag = reinterpret_cast<const char*>(scalar.tag);
        const bool as_string = scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                               (tag != nullptr && std::string_view(tag) == YAML_STR_TAG);
        Json value = as_string ? Json(text) : resolvePlain(text, currentPath(), at);
        return place(std::move(value), anchorOf(scalar.anchor), at, 1) != nullptr;
      }
      case YAML_ALIAS_EVENT: {
        const std::string name(reinterpret_cast<const char*>(event.data.alias.anchor));
        const auto it = anchors_.find(name);
        if (it == anchors_.end()) {
          diagnostics_.error(currentPath(), "alias *" + name + " names no anchor", at.line,
                             at.column);
          return false;
        }
        if (expectingKey()) {
          if (!it->second.value.is_string()) {
            diagnostics_.error(currentPath(), "a map key must be a plain value, not a list or map",
                               at.line, at.column);
            return false;
          }
          return takeKey(it->second.value.get<std::string>(), at);
        }
        return place(Json(it->second.value), {}, at, it->second.nodes) != nullptr;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (expectingKey()) {
          diagnostics_.error(currentPath(), "a map key must be a plain value, not a list or map",
                             at.line, at.column);
          return false;
        }
        if (frames_.size() >= kMaxDepth) {
          diagnostics_.error(currentPath(),
                             "nesting deeper than " + std::to_string(kMaxDepth) + " levels",
                             at.line, at.column);
          return false;
        }
        const bool map = event.type == YAML_MAPPING_START_EVENT;
        const yaml_char_t* anchor =
            map ? event.data.mapping_start.anchor : event.data.sequence_start.anchor;
        const std::string path = currentPath();
        Json* container = place(map ? Json::object() : Json::array(), {}, at, 1);
        if (container == nullptr) return false;
        frames_.push_back(Frame{container, map, path, {}, false, anchorOf(anchor), nodes_});
        return true;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        Frame frame = std::move(frames_.back());
        frames_.pop_back();
        if (!frame.anchor.empty()) {
          anchors_[frame.anchor] = Anchored{*frame.container, nodes_ - frame.nodes_before + 1};
        }
        return true;
      }
      default:
        return true;
    }
  }

  Json& root() { return root_; }

 private:
  // Open containers. Their addresses are stable while open: only the innermost one grows.
  struct Frame {
    Json* container;
    bool map;
    std::string path;    // JSON pointer of this container
    std::string key;     // maps: the key of the value being read
    bool have_key;       // maps: a key has been read, its value has not
    std::string anchor;  // anchor on this container, if any
    std::size_t nodes_before;
  };
  // NOLINTNEXTLINE(bugprone-exception-escape): the implicit moves cannot throw (clang-tidy 14)
  struct Anchored {
    Json value;
    std::size_t nodes = 0;  // values it expands to
  };

  static std::string anchorOf(const yaml_char_t* anchor) {
    return anchor == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(anchor));
  }

  bool expectingKey() const {
    return !frames_.empty() && frames_.back().map && !frames_.back().have_key;
  }

  bool takeKey(const std::string& key, SourcePosition at) {
    Frame& frame = frames_.back();
    const std::string child = joinPath(frame.path, key);
    if (frame.container->contains(key)) {
      diagnostics_.error(child,
                         "duplicate key \"" + key +
                             "\": a key may appear only once in a map (a second value would "
                             "silently replace the first)",
                         at.line, at.column);
    }
    frame.key = key;
    frame.have_key = true;
    return true;
  }

  std::string currentPath() const {
    if (frames_.empty()) return "";
    const Frame& frame = frames_.back();
    if (frame.map) return joinPath(frame.path, frame.key);
    return frame.path + "/" + std::to_string(frame.container->size());
  }

  // Stores `value` at the current position; returns where it lives, or null on error.
  Json* place(Json value, const std::string& anchor, SourcePosition at, std::size_t nodes) {
    nodes_ += nodes;
    if (nodes_ > kMaxNodes) {
      diagnostics_.error(
          currentPath(),
          "the document expands to more than " + std::to_string(kMaxNodes) + " values (aliases?)",
          at.line, at.column);
      return nullptr;
    }
    positions_.emplace(currentPath(), at);
    if (!anchor.empty()) anchors_[anchor] = Anchored{value, nodes};
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.map) {
      Json& slot = (*frame.container)[frame.key];
      slot = std::move(value);
      frame.have_key = false;
      return &slot;
    }
    frame.container->push_back(std::move(value));
    return &frame.container->back();
  }

  Json resolvePlain(const std::string& text, const std::string& path, SourcePosition at) {
    if (isNullScalar(text)) return nullptr;
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    if (isInteger(text)) {
      const char* first = text.data() + (text[0] == '+' ? 1 : 0);
      const char* last = text.data() + text.size();
      std::int64_t i = 0;
      if (auto [p, ec] = std::from_chars(first, last, i); ec == std::errc() && p == last) return i;
      std::uint64_t u = 0;
      if (auto [p, ec] = std::from_chars(first, last, u); ec == std::errc() && p == last) return u;
      // Beyond 64 bits: read as a float, as JSON parsers do.
    }
    if (isFloat(text)) {
      const double d = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(d)) {
        diagnostics_.error(path, "number overflow: " + text + " does not fit a double", at.line,
                           at.column);
        return nullptr;
      }
      return d;
    }
    if (isSpecialFloat(text)) {
      diagnostics_.error(path, text + " is not a finite number; infinities and NaN are not allowed",
                         at.line, at.column);
      return nullptr;
    }
    return text;
  }

  Diagnostics& diagnostics_;
  SourceMap& positions_;
  Json root_;
  std::vector<Frame> frames_;
  std::map<std::string, Anchored> anchors_;
  std::size_t nodes_ = 0;
  int documents_ = 0;
};

}  // namespace detail

namespace config {

HOLDBACK_INLINE Result<Document> parseYaml(std::string_view text) {
  Diagnostics diagnostics;
  Document document;
  document.format = DocumentFormat::kYaml;
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) {
    diagnostics.error("", "cannot initialize the YAML parser (out of memory)");
    return Result<Document>::failure(std::move(diagnostics));
  }
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  detail::YamlBuilder builder(diagnostics, document.positions);
  bool ok = true;
  HOLDBACK_TRY {
    while (true) {
      yaml_event_t event;
      if (yaml_parser_parse(&parser, &event) == 0) {
        const yaml_mark_t mark = parser.problem_mark;
        std::string message = "invalid YAML: ";
        message += parser.problem != nullptr ? parser.problem : "syntax error";
        if (parser.context != nullptr) message += std::string(" ") + parser.context;
        diagnostics.error("", message, static_cast<int>(mark.line) + 1,
                          static_cast<int>(mark.column) + 1);
        ok = false;
        break;
      }
      const bool done = event.type == YAML_STREAM_END_EVENT;
      const bool keep_going = builder.handle(event);
      yaml_event_delete(&event);
      if (!keep_going) {
        ok = false;
        break;
      }
      if (done) break;
    }
  }
  HOLDBACK_CATCH_ALL {  // allocation failure while building
    diagnostics.error("", "invalid YAML: out of memory while building the document");
    ok = false;
  }
  yaml_parser_delete(&parser);
  if (!ok) return Result<Document>::failure(std::move(diagnostics));
  document.json = std::move(builder.root());
  return Result<Document>(std::move(document), std::move(diagnostics));
}

HOLDBACK_INLINE Result<Document> parseDocument(std::string_view text) {
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
    ++i;
  }
  if (i < text.size() && (text[i] == '{' || text[i] == '[')) {
    auto parsed = parseJson(text.substr(i));
    Diagnostics diagnostics = parsed.diagnostics();
    if (!parsed) return Result<Document>::failure(std::move(diagnostics));
    return Result<Document>(Document{std::move(parsed).value(), DocumentFormat::kJson, {}},
                            std::move(diagnostics));
  }
  return parseYaml(text);
}

HOLDBACK_INLINE std::optional<std::string> readTextFile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(buffer).str();
}

HOLDBACK_INLINE Result<Document> parseDocumentFile(const std::string& file) {
  const auto text = readTextFile(file);
  if (!text) {
    Diagnostics diagnostics;
    diagnostics.error("", "cannot read file \"" + file + "\"");
    return Result<Document>::failure(std::move(diagnostics));
  }
  return parseDocument(*text);
}

HOLDBACK_INLINE Diagnostics withPositions(const Diagnostics& diagnostics,
                                          const SourceMap& positions) {
  Diagnostics out;
  for (Diagnostic d : diagnostics.all()) {
    if (d.line == 0) {
      std::string path = d.path;
      while (true) {
        if (const auto it = positions.find(path); it != positions.end()) {
          d.line = it->second.line;
          d.column = it->second.column;
          break;
        }
        if (path.empty()) break;
        path.resize(path.rfind('/'));
      }
    }
    out.add(std::move(d));
  }
  return out;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
