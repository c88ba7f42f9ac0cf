// Implementation of holdback/flow/engine_priority.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/flow/engine_priority.hpp"

#include "holdback/core/text.hpp"

#include <limits>
#include <nlohmann/json.hpp>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string_view toString(EnginePriority convention) noexcept {
  switch (convention) {
    case EnginePriority::kOff:
      return "off";
    case EnginePriority::kVllm:
      return "vllm";
    case EnginePriority::kSglang:
      return "sglang";
  }
  return "off";
}

HOLDBACK_INLINE std::optional<EnginePriority> parseEnginePriority(std::string_view text) noexcept {
  for (const EnginePriority c :
       {EnginePriority::kOff, EnginePriority::kVllm, EnginePriority::kSglang}) {
    if (text == toString(c)) return c;
  }
  return std::nullopt;
}

HOLDBACK_INLINE std::int64_t enginePriorityValue(Priority priority,
                                                 EnginePriority convention) noexcept {
  if (convention != EnginePriority::kVllm) return priority;
  if (priority == std::numeric_limits<Priority>::min()) return std::numeric_limits<Priority>::max();
  return -static_cast<std::int64_t>(priority);
}

HOLDBACK_INLINE std::optional<std::string> withEnginePriority(std::string_view body,
                                                              Priority priority,
                                                              EnginePriority convention) {
  if (convention == EnginePriority::kOff) return std::nullopt;
  // The serializer below recurses once per level: a deeper body is left as it is.
  if (jsonNestingExceeds(body, kMaxJsonNesting)) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  doc["priority"] = enginePriorityValue(priority, convention);
  // Invalid UTF-8 in a string is replaced rather than thrown about.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
