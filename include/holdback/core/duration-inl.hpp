// Implementation of holdback/core/duration.hpp: compiled into libholdback by src/core.cpp, or
// included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/core/duration.hpp"

#include <cstdint>
#include <limits>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

inline constexpr std::uint64_t kMaxMagnitude = static_cast<std::uint64_t>(
    std::numeric_limits<std::int64_t>::max());  // |INT64_MIN| excluded: keeps negation simple

// Nanoseconds per unit, 0 when the unit is unknown.
HOLDBACK_INLINE std::uint64_t unitNanoseconds(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs")
    return 1'000;  // µs (U+00B5, U+03BC)
  if (unit == "ms") return 1'000'000;
  if (unit == "s") return 1'000'000'000;
  if (unit == "m") return 60'000'000'000;
  if (unit == "h") return 3'600'000'000'000;
  return 0;
}

}  // namespace detail

HOLDBACK_INLINE std::optional<Duration> parseDuration(std::string_view text) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    negative = text[i] == '-';
    ++i;
  }
  if (text.substr(i) == "0") return Duration::zero();
  if (i == text.size()) return std::nullopt;

  std::uint64_t total = 0;
  while (i < text.size()) {
    // The whole part.
    std::uint64_t whole = 0;
    bool digits = false;
    bool overflow = false;
    for (; i < text.size() && detail::isDigit(text[i]); ++i) {
      digits = true;
      const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
      if (whole > (detail::kMaxMagnitude - d) / 10) overflow = true;
      if (!overflow) whole = whole * 10 + d;
    }
    // The fraction: keep up to 18 digits (more cannot matter at nanosecond resolution).
    std::uint64_t fraction = 0;
    std::uint64_t scale = 1;
    if (i < text.size() && text[i] == '.') {
      ++i;
      for (; i < text.size() && detail::isDigit(text[i]); ++i) {
        digits = true;
        if (scale < 1'000'000'000'000'000'000ULL) {
          fraction = fraction * 10 + static_cast<std::uint64_t>(text[i] - '0');
          scale *= 10;
        }
      }
    }
    if (!digits || overflow) return std::nullopt;
    // The unit: everything up to the next digit or '.'.
    const std::size_t unit_start = i;
    while (i < text.size() && !detail::isDigit(text[i]) && text[i] != '.') ++i;
    const std::uint64_t unit = detail::unitNanoseconds(text.substr(unit_start, i - unit_start));
    if (unit == 0) return std::nullopt;
    if (whole > detail::kMaxMagnitude / unit) return std::nullopt;
    std::uint64_t value = whole * unit;
    // fraction / scale < 1, so this part is < unit <= 3.6e12: long double keeps it exact enough.
    const auto part = static_cast<std::uint64_t>(static_cast<long double>(fraction) *
                                                 static_cast<long double>(unit) /
                                                 static_cast<long double>(scale));
    if (value > detail::kMaxMagnitude - part) return std::nullopt;
    value += part;
    if (total > detail::kMaxMagnitude - value) return std::nullopt;
    total += value;
  }
  const auto signed_total = static_cast<std::int64_t>(total);
  return Duration(negative ? -signed_total : signed_total);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
