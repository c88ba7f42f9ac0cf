// Implementation of holdback/flow/request_headers.hpp: compiled into libholdback by src/flow.cpp,
// or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/flow/request_headers.hpp"

#include "holdback/core/duration.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE RequestTtlHeader parseRequestTtl(std::optional<std::string_view> value) noexcept {
  RequestTtlHeader out;
  if (!value) return out;
  std::string_view text = *value;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  out.status = RequestTtlHeader::Status::kInvalid;
  const std::optional<Duration> ttl = parseDuration(text);
  if (!ttl || *ttl <= Duration::zero()) return out;
  out.status = RequestTtlHeader::Status::kValid;
  out.ttl = *ttl;
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
