#include "holdback/config/document.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

namespace holdback::config {
namespace {

constexpr int kMaxDepth = 128;
constexpr std::size_t kMaxNodes = 1'000'000;

SourcePosition positionOf(const YAML::Mark& mark) {
  return SourcePosition{mark.line + 1, mark.column + 1};
}

bool isNullScalar(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// YAML 1.2 core schema numbers, decimal only. Hand-written rather than std::regex, whose
// libstdc++ implementation recurses per character and can overflow the stack on long scalars.
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

std::size_t skipSign(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
}

std::size_t skipDigits(std::string_view s, std::size_t i) {
  while (i < s.size() && isDigit(s[i])) ++i;
  return i;
}

// [-+]?[0-9]+
bool isInteger(std::string_view s) {
  const std::size_t start = skipSign(s);
  const std::size_t end = skipDigits(s, start);
  return end > start && end == s.size();
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool isFloat(std::string_view s) {
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
bool isSpecialFloat(std::string_view s) {
  const std::string_view body = s.substr(skipSign(s));
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  return s == ".nan" || s == ".NaN" || s == ".NAN";
}

// yaml-cpp 0.7 loops forever, allocating, when the first token of a document is ',' (after
// optional directives, comments, "---"/"..." markers, tags and anchors), e.g. ",", " ,", "--- ,",
// "!t ,", "# c\n," (found by fuzz/config_fuzzer.cpp). Returns the offset of such a ',' if any.
std::optional<std::size_t> leadingFlowEntry(std::string_view text) {
  std::size_t i = 0;
  bool at_line_start = true;
  bool at_document_start = true;
  auto marker = [&](std::string_view m) {
    return at_line_start && text.substr(i, 3) == m &&
           (i + 3 == text.size() || text[i + 3] == ' ' || text[i + 3] == '\t' ||
            text[i + 3] == '\n' || text[i + 3] == '\r');
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      at_line_start = true;
      ++i;
      continue;
    }
    if (marker("---") || marker("...")) {
      at_document_start = true;
      at_line_start = false;
      i += 3;
      continue;
    }
    if (!at_document_start) {
      at_line_start = false;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '#' || (c == '%' && at_line_start)) {  // comment or directive: skip the line
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '!' || c == '&') {  // node properties: skip the token
      while (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n') ++i;
    } else if (c == ',') {
      return i;
    } else {
      at_document_start = false;
      ++i;
    }
    at_line_start = false;
  }
  return std::nullopt;
}

class YamlConverter {
 public:
  YamlConverter(Diagnostics& diagnostics, SourceMap& positions)
      : diagnostics_(diagnostics), positions_(positions) {}

  Json convert(const YAML::Node& node, const std::string& path, int depth,
               const YAML::Mark& fallback) {
    if (++nodes_ > kMaxNodes) {
      if (!too_big_reported_) {
        diagnostics_.error(path, "the document expands to more than " + std::to_string(kMaxNodes) +
                                     " values (aliases?)");
        too_big_reported_ = true;
      }
      return nullptr;
    }
    const bool has_mark = !node.Mark().is_null();
    const SourcePosition position = positionOf(has_mark ? node.Mark() : fallback);
    positions_.emplace(path, position);
    if (depth > kMaxDepth) {
      diagnostics_.error(path, "nesting deeper than " + std::to_string(kMaxDepth) + " levels",
                         position.line, position.column);
      return nullptr;
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Scalar:
        return scalar(node, path, position);
      case YAML::NodeType::Sequence: {
        Json array = Json::array();
        std::size_t index = 0;
        for (const YAML::Node& item : node) {
          array.push_back(convert(item, path + "/" + std::to_string(index++), depth + 1,
                                  has_mark ? node.Mark() : fallback));
        }
        return array;
      }
      case YAML::NodeType::Map: {
        Json object = Json::object();
        for (auto it = node.begin(); it != node.end(); ++it) {
          const YAML::Node key = it->first;  // a handle; it->first is a temporary proxy
          const YAML::Node value = it->second;
          const SourcePosition key_position = positionOf(key.Mark());
          if (!key.IsScalar()) {
            diagnostics_.error(path, "a map key must be a plain value, not a list or map",
                               key_position.line, key_position.column);
            continue;
          }
          const std::string& name = key.Scalar();
          const std::string child = joinPath(path, name);
          if (object.contains(name)) {
            diagnostics_.error(child,
                               "duplicate key \"" + name +
                                   "\": a key may appear only once in a map (a second value "
                                   "would silently replace the first)",
                               key_position.line, key_position.column);
          }
          object[name] = convert(value, child, depth + 1, key.Mark());
        }
        return object;
      }
    }
    return nullptr;
  }

 private:
  Json scalar(const YAML::Node& node, const std::string& path, SourcePosition position) {
    const std::string& text = node.Scalar();
    // Quoted scalars ("!") and explicit !!str are strings; only plain scalars ("?") are resolved.
    if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return text;
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
      // Beyond 64 bits: fall through to float, as JSON parsers do.
    }
    if (isFloat(text)) {
      const double d = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(d)) {
        diagnostics_.error(path, "number overflow: " + text + " does not fit a double",
                           position.line, position.column);
        return nullptr;
      }
      return d;
    }
    if (isSpecialFloat(text)) {
      diagnostics_.error(path, text + " is not a finite number; infinities and NaN are not allowed",
                         position.line, position.column);
      return nullptr;
    }
    return text;
  }

  Diagnostics& diagnostics_;
  SourceMap& positions_;
  std::size_t nodes_ = 0;
  bool too_big_reported_ = false;
};

}  // namespace

Result<Document> parseYaml(std::string_view text) {
  Diagnostics diagnostics;
  Document document;
  document.format = DocumentFormat::kYaml;
  // YAML allows no C0 control characters but tab, LF and CR (and no DEL). Reject them before
  // yaml-cpp sees them: yaml-cpp 0.7 loops forever, allocating, on "," followed by a NUL byte
  // (found by fuzz/config_fuzzer.cpp).
  int line = 1;
  int column = 1;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t' && c != '\n' && c != '\r') || byte == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", byte);
      diagnostics.error(
          "",
          std::string("invalid YAML: control character ") + hex + " is not allowed in a YAML file",
          line, column);
      return Result<Document>::failure(std::move(diagnostics));
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  if (const auto comma = leadingFlowEntry(text)) {
    const std::string_view before = text.substr(0, *comma);
    const int comma_line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    const std::size_t line_start = before.rfind('\n');
    const int comma_column =
        static_cast<int>(*comma - (line_start == std::string_view::npos ? 0 : line_start + 1)) + 1;
    diagnostics.error("", "invalid YAML: a document cannot start with ','", comma_line,
                      comma_column);
    return Result<Document>::failure(std::move(diagnostics));
  }
  std::vector<YAML::Node> nodes;
  try {
    nodes = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    diagnostics.error("", "invalid YAML: " + e.msg, e.mark.line + 1, e.mark.column + 1);
    return Result<Document>::failure(std::move(diagnostics));
  } catch (const std::exception& e) {
    diagnostics.error("", std::string("invalid YAML: ") + e.what());
    return Result<Document>::failure(std::move(diagnostics));
  }
  if (nodes.size() > 1) {
    diagnostics.error(
        "", "the file holds " + std::to_string(nodes.size()) + " YAML documents; expected one");
    return Result<Document>::failure(std::move(diagnostics));
  }
  if (!nodes.empty()) {
    YamlConverter converter(diagnostics, document.positions);
    try {
      document.json = converter.convert(nodes.front(), "", 0, nodes.front().Mark());
    } catch (const std::exception& e) {  // yaml-cpp or allocation failure while converting
      diagnostics.error("", std::string("invalid YAML: ") + e.what());
      return Result<Document>::failure(std::move(diagnostics));
    }
  }
  return Result<Document>(std::move(document), std::move(diagnostics));
}

Result<Document> parseDocument(std::string_view text) {
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

Result<Document> parseDocumentFile(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    Diagnostics diagnostics;
    diagnostics.error("", "cannot read file \"" + file + "\"");
    return Result<Document>::failure(std::move(diagnostics));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parseDocument(buffer.str());
}

Diagnostics withPositions(const Diagnostics& diagnostics, const SourceMap& positions) {
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

}  // namespace holdback::config
