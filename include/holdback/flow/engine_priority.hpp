// Priority to the engine: the request's effective priority written into the body sent to a model
// server whose own scheduler orders by priority (vLLM --scheduling-policy priority, SGLang
// --enable-priority-scheduling), as upstream's endpoint picker does.
//
// The two engines read the body's "priority" field in opposite directions:
//   sglang  higher value first: holdback's convention (interactive 10 before batch -1), so the
//           value is the priority itself;
//   vllm    lower value first, so the sign flips: value = -priority (saturating: INT32_MIN goes
//           to INT32_MAX, the only priority whose negation does not fit).
// Relative order is then the same on both engines. Off (the default) leaves bodies untouched.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

enum class EnginePriority : std::uint8_t { kOff, kVllm, kSglang };

// "off", "vllm", "sglang".
[[nodiscard]] HOLDBACK_API std::string_view toString(EnginePriority convention) noexcept;
// The convention `text` names, or nullopt.
[[nodiscard]] HOLDBACK_API std::optional<EnginePriority> parseEnginePriority(
    std::string_view text) noexcept;

// The value of the body's "priority" field for `priority` under `convention` (kOff: the
// priority itself). Never overflows. No allocation.
[[nodiscard]] HOLDBACK_API std::int64_t enginePriorityValue(Priority priority,
                                                            EnginePriority convention) noexcept;

// `body` (a JSON object) with its top-level "priority" set to enginePriorityValue(), replacing a
// client's own; nullopt when `body` is not a JSON object, nests deeper than kMaxJsonNesting
// (core/text.hpp; hosts refuse such bodies first) or `convention` is kOff. Parses and
// re-serializes the body (allocates; a per-request cold path of the host, not of the
// controller); never throws.
[[nodiscard]] HOLDBACK_API std::optional<std::string> withEnginePriority(std::string_view body,
                                                                         Priority priority,
                                                                         EnginePriority convention);

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/engine_priority-inl.hpp"
#endif
