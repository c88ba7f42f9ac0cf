// Config documents in JSON or YAML, detected by content, read into one Json value.
//
// parseDocument() looks at the first non-blank character: '{' or '[' means JSON (parsed strictly
// by parseJson), anything else YAML. YAML is read with libyaml (not yaml-cpp, which loops forever
// on inputs such as `"a",`; see docs/guide/configuration.md) and converted to Json with the
// YAML 1.2 core schema for plain scalars:
//   null, Null, NULL, ~ and an empty value       -> null
//   true/True/TRUE, false/False/FALSE            -> boolean
//   decimal integers (optional sign)             -> integer (beyond 64 bits: a float)
//   decimal floats (1.5, -2e3, .5)               -> float; .inf and .nan are errors (JSON has
//                                                   neither), and so is a float that overflows
//   anything else, and every quoted scalar       -> string ("200ms", "1Gi", "yes")
// Map keys become strings as written, so `100: 0.95` and `"-10": 0.4` give the keys "100" and
// "-10". Duplicate keys, non-scalar keys, several documents in one file, nesting deeper than 128
// and documents that expand (through aliases) to more than 1,000,000 nodes are errors.
//
// Control characters other than tab, LF and CR are rejected (libyaml).
// The YAML reader records where every value came from (a SourceMap from JSON pointer to line and
// column), so that later diagnostics can be located with withPositions().
//
// Thread safety: thread-compatible.
#pragma once

#include "holdback/abi.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

struct SourcePosition {
  int line = 0;    // 1-based
  int column = 0;  // 1-based
};

// JSON pointer -> where that value starts in the source text.
using SourceMap = std::map<std::string, SourcePosition, std::less<>>;

enum class DocumentFormat { kJson, kYaml };

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit moves cannot throw (clang-tidy 14)
struct Document {
  Json json;
  DocumentFormat format = DocumentFormat::kJson;
  SourceMap positions;  // filled for YAML
};

// Detects the format by content and parses. Like parseJson, a document with duplicate keys is
// still returned alongside its errors; check diagnostics().hasErrors().
HOLDBACK_API Result<Document> parseDocument(std::string_view text);

// YAML only.
HOLDBACK_API Result<Document> parseYaml(std::string_view text);

// The whole file as bytes, or nullopt when it cannot be read.
HOLDBACK_API std::optional<std::string> readTextFile(const std::string& file);

// Reads a file and parses it with parseDocument(). An unreadable file is an error at path "".
HOLDBACK_API Result<Document> parseDocumentFile(const std::string& file);

// A copy of `diagnostics` in which every diagnostic without a position gets the position of its
// path, or of the nearest enclosing path that has one.
HOLDBACK_API Diagnostics withPositions(const Diagnostics& diagnostics, const SourceMap& positions);

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/document-inl.hpp"
#endif
