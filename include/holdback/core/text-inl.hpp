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

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
