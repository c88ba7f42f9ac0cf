// Implementation of holdback/core/endpoint.hpp: compiled into libholdback by src/core.cpp, or
// included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/core/endpoint.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE EndpointRole parseEndpointRole(std::string_view label) noexcept {
  if (label.empty() || label == "decode") return EndpointRole::kDecode;
  if (label == "prefill") return EndpointRole::kPrefill;
  if (label == "encode-prefill") return EndpointRole::kEncodePrefill;
  if (label == "prefill-decode" || label == "both") return EndpointRole::kPrefillDecode;
  if (label == "encode-prefill-decode") return EndpointRole::kEncodePrefillDecode;
  if (label == "encode") return EndpointRole::kEncode;
  return EndpointRole::kUnknown;
}

HOLDBACK_INLINE std::string_view toString(EndpointRole role) noexcept {
  switch (role) {
    case EndpointRole::kDecode:
      return "decode";
    case EndpointRole::kPrefill:
      return "prefill";
    case EndpointRole::kEncodePrefill:
      return "encode-prefill";
    case EndpointRole::kPrefillDecode:
      return "prefill-decode";
    case EndpointRole::kEncodePrefillDecode:
      return "encode-prefill-decode";
    case EndpointRole::kEncode:
      return "encode";
    case EndpointRole::kUnknown:
      return "unknown";
  }
  return "unknown";
}

HOLDBACK_INLINE VectorEndpointSource::VectorEndpointSource(std::vector<Endpoint> endpoints,
                                                           Freshness freshness)
    : pending_(std::move(endpoints)), read_(pending_), read_version_(1), freshness_(freshness) {
  // read_ starts as the pool given: the first endpoints() neither copies nor allocates.
}

HOLDBACK_INLINE std::vector<Endpoint> VectorEndpointSource::named(std::size_t n,
                                                                  std::string_view prefix) {
  std::vector<Endpoint> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i].name = std::string(prefix) + std::to_string(i);
  return out;
}

HOLDBACK_INLINE void VectorEndpointSource::set(std::vector<Endpoint> endpoints) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = std::move(endpoints);
  version_.fetch_add(1, std::memory_order_release);
}

HOLDBACK_INLINE std::vector<Endpoint> VectorEndpointSource::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

HOLDBACK_INLINE std::span<const Endpoint> VectorEndpointSource::endpoints(TimePoint now) noexcept {
  // Unchanged since the last read (the common case): no mutex. A publication racing with this
  // load is taken by the next read, as if it had come just after this one.
  if (version_.load(std::memory_order_acquire) != read_version_) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::uint64_t version = version_.load(std::memory_order_relaxed);
    if (read_version_ != version) {
      // Copy assignment reuses read_'s capacity; it allocates only when the pool grew (or a name
      // outgrew its buffer). An allocation failure keeps the previous pool (fails stale).
      HOLDBACK_TRY {
        read_ = pending_;
        read_version_ = version;
      }
      HOLDBACK_CATCH_ALL {}
    }
  }
  if (freshness_ == Freshness::kStampNow) {
    for (Endpoint& e : read_) e.updateTime = now;
  }
  return read_;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
