// Implementation of holdback/config/quantity.hpp: compiled into libholdback by
// src/config/quantity.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/quantity.hpp"

#include <array>
#include <limits>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

__extension__ typedef __int128 Int;  // NOLINT(modernize-use-using): __extension__ needs typedef

// With at most 19 significant digits, 19 fraction digits and exponents up to 19, every
// intermediate (digits * multiplier, 10^fraction * divisor) stays below 10^38 < 2^127.
inline constexpr int kMaxDigits = 19;

struct Scale {
  std::string_view suffix;
  Int multiplier;
  Int divisor;
};

constexpr Int pow10(int n) {
  Int v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

inline constexpr std::array<Scale, 15> kScales = {{
    {"Ki", Int(1) << 10, 1},
    {"Mi", Int(1) << 20, 1},
    {"Gi", Int(1) << 30, 1},
    {"Ti", Int(1) << 40, 1},
    {"Pi", Int(1) << 50, 1},
    {"Ei", Int(1) << 60, 1},
    {"n", 1, pow10(9)},
    {"u", 1, pow10(6)},
    {"m", 1, pow10(3)},
    {"k", pow10(3), 1},
    {"M", pow10(6), 1},
    {"G", pow10(9), 1},
    {"T", pow10(12), 1},
    {"P", pow10(15), 1},
    {"E", pow10(18), 1},
}};

}  // namespace detail

namespace config {

HOLDBACK_INLINE std::optional<std::int64_t> parseQuantity(std::string_view text) noexcept {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';

  // Mantissa: digits with an optional fraction.
  detail::Int digits = 0;
  int digit_count = 0;
  int fraction_digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (digits == 0 && c == '0') {
      if (seen_point) ++fraction_digits;  // leading zeros of a fraction still scale it
      continue;
    }
    if (++digit_count > detail::kMaxDigits) return std::nullopt;
    digits = digits * 10 + (c - '0');
    if (seen_point) ++fraction_digits;
  }
  const std::size_t mantissa_end = i;
  const std::size_t sign_len = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  if (mantissa_end == sign_len || (mantissa_end == sign_len + 1 && seen_point)) {
    return std::nullopt;  // no digits at all
  }
  if (fraction_digits > detail::kMaxDigits) return std::nullopt;

  detail::Int multiplier = 1;
  detail::Int divisor = detail::pow10(fraction_digits);
  const std::string_view suffix = text.substr(mantissa_end);
  if (!suffix.empty()) {
    bool matched = false;
    for (const detail::Scale& scale : detail::kScales) {
      if (suffix == scale.suffix) {
        multiplier = scale.multiplier;
        divisor *= scale.divisor;
        matched = true;
        break;
      }
    }
    if (!matched) {
      // Decimal exponent: e|E, optional sign, 1-3 digits.
      if (suffix[0] != 'e' && suffix[0] != 'E') return std::nullopt;
      std::size_t j = 1;
      bool exp_negative = false;
      if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) {
        exp_negative = suffix[j++] == '-';
      }
      if (j == suffix.size() || suffix.size() - j > 3) return std::nullopt;
      int exponent = 0;
      for (; j < suffix.size(); ++j) {
        if (suffix[j] < '0' || suffix[j] > '9') return std::nullopt;
        exponent = exponent * 10 + (suffix[j] - '0');
      }
      if (exponent > detail::kMaxDigits) {
        if (exp_negative) return negative ? 0 : (digits == 0 ? 0 : 1);  // tiny: rounds up to 1
        return digits == 0 ? std::optional<std::int64_t>(0) : std::nullopt;
      }
      if (exp_negative) {
        divisor *= detail::pow10(exponent);
      } else {
        multiplier = detail::pow10(exponent);
      }
    }
  }

  // value = digits * multiplier / divisor, rounded away from zero (Kubernetes rounds up).
  const detail::Int limit = detail::Int(std::numeric_limits<std::int64_t>::max());
  const detail::Int numerator = digits * multiplier;
  detail::Int value = numerator / divisor;
  if (numerator % divisor != 0) ++value;
  if (value > limit) return std::nullopt;
  return static_cast<std::int64_t>(negative ? -value : value);
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
