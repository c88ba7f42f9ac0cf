// The KV footprint the gateway declares for each request (FlowRequest::kvTokens), and what it
// learns from completions for requests that declare no output limit.
//
//   declared footprint = promptTokens + max_tokens           when the body has max_tokens
//                      = promptTokens + learned(priority)     otherwise
//
// learned(priority) is the OutputEstimator's expected output of the request's priority band: a
// high quantile (p90) of the completion tokens of that band's earlier requests without
// max_tokens, and 16 (the completions API's default) until eight of them completed
// (holdback/core/output_estimator.hpp). A band whose answers run to hundreds of tokens therefore
// declares hundreds, not 16, once it has been seen, and the reservation's room and the fit-first
// pick count its real KV.
//
// The completion tokens come from the response: a non-streamed body's "usage", a stream's usage
// event, or for a stream without one the count of its content events (StreamUsageScanner).
// Revoked (evicted) requests and responses without a usage figure teach nothing.
//
// Thread safety: thread-safe (the estimator is; the functions keep no state).
#pragma once

#include <cstdint>
#include <memory>

#include "gateway_http.hpp"
#include "holdback/core/output_estimator.hpp"
#include "holdback/core/types.hpp"

namespace holdback::gateway {

// The gateway's estimator: p90 per priority band, 16 tokens until 8 completions.
[[nodiscard]] std::unique_ptr<OutputEstimator> makeOutputEstimator();

// The request's declared KV footprint (see the file comment); saturates at INT64_MAX.
[[nodiscard]] std::int64_t declaredFootprint(const CompletionBody& body,
                                             const OutputEstimator& learned, Priority priority);

// Whether a completed request teaches the estimator: it declared no max_tokens (the estimate is
// for those), its usage is known and it was not revoked.
[[nodiscard]] bool learnsFootprint(const CompletionBody& body, bool usageKnown,
                                   bool revoked) noexcept;

}  // namespace holdback::gateway
