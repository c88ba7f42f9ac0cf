// SaturationDetector: how full the pool is, and which endpoints may take more work.
//
// The host fills an Endpoint snapshot per model server from its own telemetry (scraped vLLM
// metrics, in-flight counters, ...) and hands a span of them, plus `now` from its own clock, to
// the detector. Detectors never read the system clock, never allocate in steady state and never
// throw.
//
//   saturation(endpoints, now)  aggregate pool saturation: < 1.0 is the fraction of capacity in
//                               use, >= 1.0 is saturated, > 1.0 measures overload (not clamped).
//                               Always finite and >= 0. An empty pool reads 1.0.
//   filter(endpoints, now, out) which endpoints a scheduler may still route to; writes their
//                               indices into `out` and says whether it failed open.
//
// Thread safety: implementations are thread-safe (saturation and filter may be called
// concurrently).
#pragma once

#include "holdback/abi.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// The library's clock types. Time is always passed in by the host (or a simulator), so any
// epoch works; steady_clock's time_point is only the carrier type.
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Duration = std::chrono::nanoseconds;

// The endpoint's role in disaggregated serving (label llm-d.ai/role in the Go gateway).
enum class EndpointRole : std::uint8_t {
  kDecode,               // "decode", "" or no label: a monolithic server counts as decode
  kPrefill,              // "prefill"
  kEncodePrefill,        // "encode-prefill" (prefill stage)
  kPrefillDecode,        // "prefill-decode" / "both": interleaved, counts in both stages
  kEncodePrefillDecode,  // "encode-prefill-decode": interleaved
  kEncode,               // "encode": in neither stage
  kUnknown,              // any other label: in neither stage
};

// Parses a role label as the Go gateway does ("" -> kDecode, "both" -> kPrefillDecode, anything
// unrecognised -> kUnknown).
[[nodiscard]] HOLDBACK_API EndpointRole parseEndpointRole(std::string_view label) noexcept;
[[nodiscard]] HOLDBACK_API std::string_view toString(EndpointRole role) noexcept;

// One endpoint's telemetry, as the host last observed it.
struct Endpoint {
  std::string name;
  // When the metrics below were taken; nullopt = no metrics yet (treated as stale).
  std::optional<TimePoint> updateTime;
  // vLLM's num_requests_waiting (a count; doubles because Prometheus gauges are floats).
  double waitingQueueSize = 0.0;
  // KV-cache usage as a fraction in [0, 1] (vLLM's kv_cache_usage_perc despite its name).
  double kvCacheUsage = 0.0;
  // vLLM's num_requests_running.
  double runningRequests = 0.0;
  // Requests and tokens the gateway has dispatched to this endpoint and not yet seen finish.
  std::int64_t inFlightRequests = 0;
  std::int64_t inFlightTokens = 0;
  // Relative capacity (for weighted aggregation in mixed pools, e.g. H100 = 4, L4 = 1).
  double weight = 1.0;
  EndpointRole role = EndpointRole::kDecode;
};

struct FilterResult {
  // Number of indices written to `out`.
  std::size_t kept = 0;
  // True when no endpoint passed and the original list was returned instead.
  bool failOpen = false;
};

class HOLDBACK_API SaturationDetector {
 public:
  virtual ~SaturationDetector() = default;
  SaturationDetector(const SaturationDetector&) = delete;
  SaturationDetector& operator=(const SaturationDetector&) = delete;

  [[nodiscard]] virtual double saturation(std::span<const Endpoint> endpoints,
                                          TimePoint now) const noexcept = 0;

  // Writes the indices (into `endpoints`) of the endpoints that may take more work into `out`,
  // in order. `out` should hold endpoints.size() elements; at most out.size() are written.
  virtual FilterResult filter(std::span<const Endpoint> endpoints, TimePoint now,
                              std::span<std::size_t> out) const noexcept = 0;

  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  [[nodiscard]] std::string_view name() const noexcept { return name_; }

 protected:
  explicit SaturationDetector(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/saturation_detector-inl.hpp"
#endif
