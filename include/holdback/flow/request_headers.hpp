// Request and response headers of upstream's newer flow control, for a gateway that puts holdback
// in front of model servers (the example gateway uses these; a host's own gateway can too).
//
//   x-llm-d-inference-ttl: DURATION   (request) the caller's queue budget, a Go duration such as
//                                     "1500ms" or "2s". It can only shorten the budget: the
//                                     controller takes the smallest set TTL of the request, its
//                                     band and the default (resolveRequestTtl). parseRequestTtl:
//                                     spaces trimmed; a value that is not a duration, or is not
//                                     > 0, is an error (kInvalid), which a gateway answers 400.
//   x-llm-d-flow-band-headroom-requests: N   (response) advisory: the room left, in requests, in
//                                     the band that served the request, read when the response
//                                     head goes out (FlowController::bandHeadroom); omitted when
//                                     the band cannot be read. A gateway owns it: a model
//                                     server's header of that name is dropped.
//
// Thread safety: thread-safe (pure functions). None of them allocates.
#pragma once

#include "holdback/abi.hpp"

#include <optional>
#include <string_view>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

inline constexpr std::string_view kRequestTtlHeader = "x-llm-d-inference-ttl";
inline constexpr std::string_view kBandHeadroomHeader = "x-llm-d-flow-band-headroom-requests";

struct RequestTtlHeader {
  enum class Status { kAbsent, kValid, kInvalid };
  Status status = Status::kAbsent;
  Duration ttl{0};  // > 0 when kValid
};

// The TTL header's value (nullopt = the header is absent).
[[nodiscard]] HOLDBACK_API RequestTtlHeader
parseRequestTtl(std::optional<std::string_view> value) noexcept;

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/request_headers-inl.hpp"
#endif
