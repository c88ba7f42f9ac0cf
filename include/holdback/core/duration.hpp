// Go-style duration strings, as Kubernetes and the Go gateway's configs write them: "200ms",
// "1.5s", "2m", "1h30m", "-5s", "0". Their inverse, formatDuration, is in holdback/core/text.hpp.
//
// Grammar (Go's time.ParseDuration): an optional sign, then "0" alone, or one or more
// <decimal><unit> pairs where <decimal> is digits with an optional fraction (".5", "1.", "1.25")
// and <unit> is one of ns, us, µs, μs, ms, s, m, h. Whitespace, a missing unit, an unknown unit
// and values beyond what an int64 count of nanoseconds holds (about 292 years) are rejected;
// fractions below a nanosecond are truncated.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <string>
#include <string_view>

#include "holdback/core/text.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The duration `text` denotes, or nullopt when it is not a duration string.
[[nodiscard]] HOLDBACK_API std::optional<Duration> parseDuration(std::string_view text);

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/core/duration-inl.hpp"
#endif
