// One strict pass over a JSON text (RFC 8259) that reports its values to a handler in document
// order, without building a document, allocating (except to decode a string that has escapes) or
// recursing: the gateway's reader of request and response bodies (scanCompletionBody,
// scanResponseUsage). It accepts and refuses exactly what nlohmann::json::sax_parse accepts and
// refuses, and reports the same events (tests/json_scan_test.cpp compares the two):
//   - one value, with whitespace (space, tab, LF, CR) around it; a UTF-8 byte order mark at the
//     very start is skipped; a NUL byte after the value ends the text (what follows is ignored);
//   - strings: no control characters, well-formed UTF-8, the escapes \" \\ \/ \b \f \n \r \t
//     and \uXXXX (a surrogate pair as one code point, a lone surrogate refused), reported decoded;
//   - numbers: an integer that fits in int64 (negative) or uint64 (otherwise) is reported as one;
//     any other number (fraction, exponent, too large) as a float, and refused when not finite
//     as a double;
//   - a handler method returning false stops the scan, which then fails.
// Handler: bool null(), boolean(bool), integer(std::int64_t) (a negative integer or -0),
// unsignedInteger(std::uint64_t), floating(), string(std::string_view), key(std::string_view),
// startObject(), endObject(), startArray(), endArray(). Nesting: the handler bounds it (it
// refuses a start past its limit); the scan keeps one bit per level for up to kMaxLevels and
// fails past that.
//
// Thread safety: a plain function of its arguments.
#pragma once

#include <array>
#include <bitset>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace holdback::gateway::json_scan {

inline constexpr std::size_t kMaxLevels = 1024;

namespace detail {

inline bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The code unit of "\uXXXX" whose hex digits start at p (four of them before end), or -1.
inline long hex4(const char* p, const char* end) {
  if (end - p < 4) return -1;
  long v = 0;
  for (int i = 0; i < 4; ++i) {
    const int h = hexValue(p[i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

inline void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The length of the well-formed UTF-8 sequence (2 to 4 bytes) that starts at p with a byte of
// 0x80 or more, or 0 (RFC 3629's table, as nlohmann's lexer checks it).
inline std::size_t utf8Sequence(const unsigned char* p, const unsigned char* end) {
  const unsigned char b = p[0];
  const auto left = static_cast<std::size_t>(end - p);
  const auto cont = [&](std::size_t i, unsigned char lo, unsigned char hi) {
    return i < left && p[i] >= lo && p[i] <= hi;
  };
  if (b >= 0xC2 && b <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (b == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b == 0xED) return cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if (b == 0xF0) return cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  if (b >= 0xF1 && b <= 0xF3) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  }
  if (b == 0xF4) return cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

// The bytes a string holds as they are: printable ASCII other than the quote and the backslash.
inline constexpr std::array<bool, 256> kPlainAscii = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

// Reads the string whose opening quote is at `p`; on success `p` is past the closing quote and
// `out` views the decoded text (the input itself when it has no escapes, else `scratch`).
inline bool readString(const char*& p, const char* end, std::string& scratch,
                       std::string_view& out) {
  const char* const start = ++p;
  bool escaped = false;
  while (p < end) {
    // A run of plain ASCII (neither a quote, a backslash nor a control character), one table
    // lookup a byte; the byte that ends it is looked at below.
    const char* const run = p;
    while (p < end && kPlainAscii[static_cast<unsigned char>(*p)]) ++p;
    if (escaped && p != run) scratch.append(run, p);
    if (p >= end) break;
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') break;
    if (c < 0x20) return false;
    if (c == '\\') {
      if (!escaped) {
        escaped = true;
        scratch.assign(start, p);
      }
      if (end - p < 2) return false;
      const char e = p[1];
      p += 2;
      switch (e) {
        case '"':
          scratch.push_back('"');
          break;
        case '\\':
          scratch.push_back('\\');
          break;
        case '/':
          scratch.push_back('/');
          break;
        case 'b':
          scratch.push_back('\b');
          break;
        case 'f':
          scratch.push_back('\f');
          break;
        case 'n':
          scratch.push_back('\n');
          break;
        case 'r':
          scratch.push_back('\r');
          break;
        case 't':
          scratch.push_back('\t');
          break;
        case 'u': {
          const long u = hex4(p, end);
          if (u < 0) return false;
          p += 4;
          std::uint32_t cp = static_cast<std::uint32_t>(u);
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low one must follow
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u') return false;
            const long low = hex4(p + 2, end);
            if (low < 0xDC00 || low > 0xDFFF) return false;
            p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<std::uint32_t>(low) - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          appendUtf8(scratch, cp);
          break;
        }
        default:
          return false;
      }
      continue;
    }
    std::size_t n = 1;
    if (c >= 0x80) {
      n = utf8Sequence(reinterpret_cast<const unsigned char*>(p),
                       reinterpret_cast<const unsigned char*>(end));
      if (n == 0) return false;
    }
    if (escaped) scratch.append(p, n);
    p += n;
  }
  if (p >= end) return false;  // no closing quote
  out = escaped ? std::string_view(scratch)
                : std::string_view(start, static_cast<std::size_t>(p - start));
  ++p;
  return true;
}

enum class Number { kInvalid, kInteger, kUnsigned, kFloat };

// Reads the number at `p` (a '-' or a digit); on success `p` is past it.
inline Number readNumber(const char*& p, const char* end, std::int64_t& integer,
                         std::uint64_t& unsignedInteger) {
  const char* const start = p;
  const bool negative = *p == '-';
  if (negative) ++p;
  if (p >= end || *p < '0' || *p > '9') return Number::kInvalid;
  std::uint64_t magnitude = 0;
  bool overflow = false;
  if (*p == '0') {
    ++p;
  } else {
    while (p < end && *p >= '0' && *p <= '9') {
      const auto d = static_cast<std::uint64_t>(*p - '0');
      if (magnitude > (UINT64_MAX - d) / 10) overflow = true;
      magnitude = magnitude * 10 + d;
      ++p;
    }
  }
  bool fraction = false;
  if (p < end && *p == '.') {
    ++p;
    if (p >= end || *p < '0' || *p > '9') return Number::kInvalid;
    while (p < end && *p >= '0' && *p <= '9') ++p;
    fraction = true;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p < end && (*p == '+' || *p == '-')) ++p;
    if (p >= end || *p < '0' || *p > '9') return Number::kInvalid;
    while (p < end && *p >= '0' && *p <= '9') ++p;
    fraction = true;
  }
  if (!fraction && !overflow) {
    if (!negative) {
      unsignedInteger = magnitude;
      return Number::kUnsigned;
    }
    if (magnitude <= std::uint64_t{1} << 63) {
      integer =
          magnitude == std::uint64_t{1} << 63 ? INT64_MIN : -static_cast<std::int64_t>(magnitude);
      return Number::kInteger;
    }
  }
  // A float (or an integer too large for 64 bits): refused when it is not finite as a double.
  const std::string text(start, p);
  return std::isfinite(std::strtod(text.c_str(), nullptr)) ? Number::kFloat : Number::kInvalid;
}

}  // namespace detail

// Scans `text` (see the top of this file); true when it is one well-formed JSON value and the
// handler accepted every event.
template <class Handler>
bool scan(std::string_view text, Handler& h) {
  const char* p = text.data();
  const char* const end = p + text.size();
  if (p < end && static_cast<unsigned char>(*p) == 0xEF) {  // a byte order mark
    if (end - p < 3 || static_cast<unsigned char>(p[1]) != 0xBB ||
        static_cast<unsigned char>(p[2]) != 0xBF) {
      return false;
    }
    p += 3;
  }
  std::string scratch;
  std::string_view str;
  std::bitset<kMaxLevels> isObject;  // per open level: an object (else an array)
  std::size_t depth = 0;
  const auto skip = [&] {
    while (p < end && detail::isSpace(*p)) ++p;
  };
  // After '{' or ',' in an object: a key and its colon.
  const auto readKey = [&] {
    skip();
    if (p >= end || *p != '"' || !detail::readString(p, end, scratch, str)) return false;
    if (!h.key(str)) return false;
    skip();
    if (p >= end || *p != ':') return false;
    ++p;
    return true;
  };
  for (;;) {
    // A value.
    skip();
    if (p >= end) return false;
    bool opened = false;
    switch (*p) {
      case '{':
        ++p;
        if (depth >= kMaxLevels || !h.startObject()) return false;
        isObject[depth++] = true;
        skip();
        if (p < end && *p == '}') {
          ++p;
          --depth;
          if (!h.endObject()) return false;
          break;
        }
        if (!readKey()) return false;
        opened = true;
        break;
      case '[':
        ++p;
        if (depth >= kMaxLevels || !h.startArray()) return false;
        isObject[depth++] = false;
        skip();
        if (p < end && *p == ']') {
          ++p;
          --depth;
          if (!h.endArray()) return false;
          break;
        }
        opened = true;
        break;
      case '"':
        if (!detail::readString(p, end, scratch, str) || !h.string(str)) return false;
        break;
      case 't':
        if (end - p < 4 || std::memcmp(p, "true", 4) != 0 || !h.boolean(true)) return false;
        p += 4;
        break;
      case 'f':
        if (end - p < 5 || std::memcmp(p, "false", 5) != 0 || !h.boolean(false)) return false;
        p += 5;
        break;
      case 'n':
        if (end - p < 4 || std::memcmp(p, "null", 4) != 0 || !h.null()) return false;
        p += 4;
        break;
      default: {
        if (*p != '-' && (*p < '0' || *p > '9')) return false;
        std::int64_t i = 0;
        std::uint64_t u = 0;
        switch (detail::readNumber(p, end, i, u)) {
          case detail::Number::kInvalid:
            return false;
          case detail::Number::kInteger:
            if (!h.integer(i)) return false;
            break;
          case detail::Number::kUnsigned:
            if (!h.unsignedInteger(u)) return false;
            break;
          case detail::Number::kFloat:
            if (!h.floating()) return false;
            break;
        }
      }
    }
    if (opened) continue;  // the container's first value
    // After a value: the next one in its container, or the container's end (maybe several).
    for (;;) {
      skip();
      if (depth == 0) return p == end || *p == '\0';
      if (p >= end) return false;
      const char c = *p++;
      if (c == ',') {
        if (isObject[depth - 1] && !readKey()) return false;
        break;
      }
      if (c == (isObject[depth - 1] ? '}' : ']')) {
        --depth;
        if (!(isObject[depth] ? h.endObject() : h.endArray())) return false;
        continue;
      }
      return false;
    }
  }
}

}  // namespace holdback::gateway::json_scan
