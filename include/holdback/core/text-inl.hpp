// Implementation of holdback/core/text.hpp: compiled into libholdback by src/core.cpp, or included
// by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/core/text.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string formatNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  std::string out(buf, ec == std::errc() ? end : buf);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

HOLDBACK_INLINE std::string joinPath(std::string_view base, std::string_view token) {
  std::string out(base);
  out += '/';
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

HOLDBACK_INLINE std::string formatDuration(Duration duration) {
  const std::int64_t ns = duration.count();
  if (ns == 0) return "0s";
  std::string out = ns < 0 ? "-" : "";
  // Magnitude as unsigned, so INT64_MIN is fine.
  const std::uint64_t magnitude =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  struct Unit {
    std::uint64_t size;
    int digits;  // fraction digits of one unit
    const char* name;
  };
  static constexpr Unit kUnits[] = {
      {1'000'000'000, 9, "s"}, {1'000'000, 6, "ms"}, {1'000, 3, "us"}, {1, 0, "ns"}};
  for (const Unit& unit : kUnits) {
    if (magnitude < unit.size && unit.size != 1) continue;
    out += std::to_string(magnitude / unit.size);
    std::uint64_t rest = magnitude % unit.size;
    if (rest != 0) {
      std::string fraction = std::to_string(rest);
      fraction.insert(0, static_cast<std::size_t>(unit.digits) - fraction.size(), '0');
      while (fraction.back() == '0') fraction.pop_back();
      out += "." + fraction;
    }
    out += unit.name;
    break;
  }
  return out;
}

namespace detail {
// The length of the well-formed UTF-8 sequence at the start of `s` (1-4), or 0 when it does not
// start with one; `*bad` is then the length of the maximal ill-formed subpart (at least 1).
inline std::size_t utf8SequenceLength(std::string_view s, std::size_t* bad) noexcept {
  const auto byte = [&s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    need = 2;
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (std::size_t i = 1; i <= need; ++i) {
    const unsigned char lower = i == 1 ? lo : 0x80, upper = i == 1 ? hi : 0xBF;
    if (i >= s.size() || byte(i) < lower || byte(i) > upper) {
      *bad = i;
      return 0;
    }
  }
  return need + 1;
}
}  // namespace detail

HOLDBACK_INLINE bool isValidUtf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t bad = 0;
    const std::size_t n = detail::utf8SequenceLength(text.substr(i), &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

HOLDBACK_INLINE std::string toValidUtf8(std::string_view text) {
  if (isValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t bad = 0;
    const std::size_t n = detail::utf8SequenceLength(text.substr(i), &bad);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      i += bad;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

HOLDBACK_INLINE bool jsonNestingExceeds(std::string_view text, std::size_t maxDepth) noexcept {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > maxDepth) return true;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return false;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
