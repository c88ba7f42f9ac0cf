// Text helpers every layer uses in its messages: numbers, JSON pointers and durations, each
// written one way across the library (validation messages of policies, detectors, the flow
// controller and the config loader read alike).
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <string>
#include <string_view>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// Shortest decimal that round-trips, always with a '.' or an exponent ("0.1", "2.0", "1e-07");
// NaN and infinities print as "nan", "inf", "-inf".
[[nodiscard]] HOLDBACK_API std::string formatNumber(double value);

// "/a/b" + "c/d" -> "/a/b/c~1d" (RFC 6901 escaping of the appended token).
[[nodiscard]] HOLDBACK_API std::string joinPath(std::string_view base, std::string_view token);

// A Go-style duration string that parseDuration() (core/duration.hpp) reads back exactly: "0s",
// "200ms", "1.5s", "90s", "-250us", "7ns". The largest of s, ms, us, ns that keeps the number >= 1
// is used, with the fraction written out.
[[nodiscard]] HOLDBACK_API std::string formatDuration(Duration duration);

namespace detail {
// '0'..'9' (std::isdigit depends on the locale and takes an int).
[[nodiscard]] constexpr bool isDigit(char c) noexcept {
  return c >= '0' && c <= '9';
}
}  // namespace detail

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/core/text-inl.hpp"
#endif
