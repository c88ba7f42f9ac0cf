// SHA-256 (FIPS 180-4) of a byte string, for the API-key table (tenants.hpp): keys are looked up
// by their digest, so that the time a lookup takes tells a caller nothing about how close its
// key came to a real one (comparing digests leaks at most how many leading digest bytes matched,
// which does not help to find a key: that would need a preimage).
//
// Thread safety: thread-safe (a pure function).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace holdback::gateway {

using Sha256Digest = std::array<std::uint8_t, 32>;

[[nodiscard]] Sha256Digest sha256(std::string_view bytes) noexcept;

}  // namespace holdback::gateway
