// Endpoints: one model server's telemetry as the host last observed it, and where the flow
// controller reads the pool from.
//
//   Endpoint              the snapshot a host fills per model server (scraped vLLM metrics,
//                         in-flight counters, ...); detectors read spans of them
//   EndpointSource        the host interface the flow controller reads the pool through
//   VectorEndpointSource  a ready-made, thread-safe EndpointSource over a vector: the host (or a
//                         test) publishes a new pool with set()/update(), the controller reads it
//
// Thread safety: Endpoint is a value; EndpointSource and VectorEndpointSource state theirs below.
#pragma once

#include "holdback/abi.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

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
  // The endpoint's capacity where the host knows it; 0 = unknown (negative reads as unknown).
  // Slots: how many requests run at once (vLLM's --max-num-seqs); KV: its KV cache in tokens
  // (vLLM's num_gpu_blocks x block_size). DispatchLedger::fill writes both from the endpoint's
  // registered capacity (the slots from its observed slot count when none is configured).
  // Detectors use them for their per-endpoint room (SaturationDetector::room).
  std::int64_t maxRunningRequests = 0;
  std::int64_t kvCapacityTokens = 0;
  // Relative capacity (for weighted aggregation in mixed pools, e.g. H100 = 4, L4 = 1).
  double weight = 1.0;
  EndpointRole role = EndpointRole::kDecode;
};

// Where the controller reads the pool from.
// Thread safety: thread-compatible suffices (a controller calls it from one thread at a time,
// under its sampler's mutex and under no controller lock); a source shared by several
// controllers must be thread-safe.
class HOLDBACK_API EndpointSource {
 public:
  virtual ~EndpointSource() = default;
  // The current pool. The span must stay valid until the next call on this source; the
  // controller calls it from one thread at a time. Must not throw; should not allocate. May call
  // any FlowController method (see flow/pool_pressure.hpp, "Locking").
  [[nodiscard]] virtual std::span<const Endpoint> endpoints(TimePoint now) noexcept = 0;
};

// An EndpointSource over a vector the host publishes. set() and update() write a pending copy
// under a small mutex; endpoints() takes the pending copy over into its own read buffer only when
// it changed, so the span it returned earlier stays valid while another thread publishes, and a
// read with no change in between neither copies, allocates nor takes the mutex.
//
// With Freshness::kStampNow every endpoint read gets updateTime = now, as if its metrics had
// just been scraped (hosts and tests whose telemetry is always current).
//
// Thread safety: thread-safe. set(), update() and snapshot() may be called from any thread at any
// time; endpoints() must be called by one reader at a time (one controller, as EndpointSource
// allows), and the span stays valid until that reader's next call.
class HOLDBACK_API VectorEndpointSource : public EndpointSource {
 public:
  enum class Freshness : std::uint8_t { kAsPublished, kStampNow };

  explicit VectorEndpointSource(std::vector<Endpoint> endpoints = {},
                                Freshness freshness = Freshness::kAsPublished);
  // `n` endpoints named "<prefix>0", "<prefix>1", ... with default telemetry.
  [[nodiscard]] static std::vector<Endpoint> named(std::size_t n, std::string_view prefix = "ep");

  // Replaces the pool. Allocates.
  void set(std::vector<Endpoint> endpoints);
  // Edits the pool in place: fn(std::vector<Endpoint>&) runs under the source's mutex, so it
  // must be short and must not call back into this source.
  template <class Fn>
  void update(Fn&& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    std::forward<Fn>(fn)(pending_);
    version_.fetch_add(1, std::memory_order_release);
  }
  // A copy of the pool as last published.
  [[nodiscard]] std::vector<Endpoint> snapshot() const;

  [[nodiscard]] std::span<const Endpoint> endpoints(TimePoint now) noexcept final;

 private:
  mutable std::mutex mu_;
  std::vector<Endpoint> pending_;  // guarded by mu_
  // Written under mu_; endpoints() reads it without the mutex to skip it when nothing changed.
  std::atomic<std::uint64_t> version_{1};
  // The reader's side: touched only by endpoints() (one reader at a time).
  std::vector<Endpoint> read_;
  std::uint64_t read_version_ = 0;
  Freshness freshness_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/core/endpoint-inl.hpp"
#endif
