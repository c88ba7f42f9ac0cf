// Kubernetes resource quantities ("1Gi", "500M", "1k", "5000", "1.5e3") as the Go gateway
// accepts them for maxBytes and maxRequests.
//
// Suffixes: binary Ki Mi Gi Ti Pi Ei (powers of 1024); decimal n u m "" k M G T P E (powers of
// 1000); or a decimal exponent (e3, E-2). A fractional result is rounded up to the next integer,
// as Kubernetes' Quantity.Value() does ("0.5" -> 1, "1500m" -> 2). Signs are accepted so that the
// caller can report a negative value with its own message.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

// The value, or nullopt when `text` is not a quantity or does not fit an int64.
HOLDBACK_API std::optional<std::int64_t> parseQuantity(std::string_view text) noexcept;

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/quantity-inl.hpp"
#endif
