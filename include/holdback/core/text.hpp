// Text helpers every layer uses in its messages: numbers, JSON pointers and durations, each
// written one way across the library (validation messages of policies, detectors, the flow
// controller and the config loader read alike).
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
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

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF). No allocation.
[[nodiscard]] HOLDBACK_API bool isValidUtf8(std::string_view text) noexcept;

// `text` with every byte that does not belong to a well-formed UTF-8 sequence replaced by U+FFFD
// (one replacement per maximal ill-formed subpart, as Unicode recommends); well-formed text comes
// back unchanged.
[[nodiscard]] HOLDBACK_API std::string toValidUtf8(std::string_view text);

// The JSON nesting-depth guard of every body the library or a host walks: whether `text` opens
// more than `maxDepth` arrays and objects inside one another (brackets inside strings do not
// count). Reads any bytes, valid JSON or not, in one pass without recursion or allocation, so
// a host can refuse a body before a parser or serializer recurses over it.
[[nodiscard]] HOLDBACK_API bool jsonNestingExceeds(std::string_view text,
                                                   std::size_t maxDepth) noexcept;

// The depth limit the library applies to bodies it parses (withEnginePriority); the example
// gateway refuses deeper request bodies with 400. Real API bodies (chat messages with tool
// schemas) nest a few dozen levels at most.
inline constexpr std::size_t kMaxJsonNesting = 128;

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
