// InFlightTracker: the requests and tokens the gateway has dispatched to each endpoint and not yet
// seen finish, which the concurrency detector reads from Endpoint::inFlightRequests/Tokens.
//
// The algorithm
//   Per endpoint name the tracker holds two atomic counters. dispatch(name, tokens) adds one
//   request and `tokens` tokens and returns a move-only InFlightHandle; the handle gives them back
//   exactly once: through release() (end of stream), or its destructor if the host forgets (a
//   cancelled or failed request cannot leak). releaseTokens() returns the tokens early (e.g. at
//   the first response chunk when no output estimate was added) and keeps the request counted.
//   A moved-from or released handle does nothing, so nothing can be released twice.
//
//   fill(endpoints) copies the current counts into each Endpoint by name (unknown names read 0)
//   just before the host calls the detector, which stays a pure function of its span.
//
//   removeEndpoint(name) drops an endpoint's counters (the endpoint left the pool): its counts
//   read 0 at once; handles still outstanding for it release into the detached counters, so a
//   re-added endpoint of the same name starts from 0 and never goes negative.
//
//   Negative token counts given to dispatch() count as 0. Counts are int64; a host would need
//   2^63 tokens in flight to overflow them.
//
// Locking
//   The name -> counters map is guarded by a std::shared_mutex: dispatch() of a known endpoint,
//   fill() and load() take it shared; the first dispatch() to a new name and removeEndpoint()
//   take it exclusively. Counter updates are relaxed atomics (the counts are statistics, read
//   by a detector that tolerates any interleaving). Handles hold a shared reference to their
//   endpoint's counters and never touch the map.
//
// Thread safety: thread-safe. dispatch() allocates only for the first request to a new endpoint
// name; release, fill and load do not allocate. Nothing throws: should that first allocation
// fail, dispatch() returns an inactive handle and counts nothing (check active() to count it).
#pragma once

#include "holdback/abi.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>

#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct InFlightLoad {
  std::int64_t requests = 0;
  std::int64_t tokens = 0;
};

namespace detail {
struct InFlightCounters {
  std::atomic<std::int64_t> requests{0};
  std::atomic<std::int64_t> tokens{0};
};
}  // namespace detail

// One dispatched request's claim on an endpoint. Move-only.
// Thread safety: thread-compatible (one handle belongs to one request; different handles may be
// released concurrently).
class [[nodiscard]] HOLDBACK_API InFlightHandle {
 public:
  InFlightHandle() = default;
  InFlightHandle(InFlightHandle&& other) noexcept
      : counters_(std::move(other.counters_)), tokens_(other.tokens_) {
    other.tokens_ = 0;
  }
  InFlightHandle& operator=(InFlightHandle&& other) noexcept {
    if (this != &other) {
      release();
      counters_ = std::move(other.counters_);
      tokens_ = other.tokens_;
      other.tokens_ = 0;
    }
    return *this;
  }
  InFlightHandle(const InFlightHandle&) = delete;
  InFlightHandle& operator=(const InFlightHandle&) = delete;
  ~InFlightHandle() { release(); }

  // True until released (or moved from).
  [[nodiscard]] bool active() const noexcept { return counters_ != nullptr; }
  // Tokens still held.
  [[nodiscard]] std::int64_t tokens() const noexcept { return tokens_; }

  // Returns the tokens now; the request stays counted until release().
  void releaseTokens() noexcept {
    if (counters_ != nullptr && tokens_ != 0) {
      counters_->tokens.fetch_sub(tokens_, std::memory_order_relaxed);
      tokens_ = 0;
    }
  }
  // Returns the request and any tokens still held. Later calls do nothing.
  void release() noexcept {
    if (counters_ == nullptr) return;
    releaseTokens();
    counters_->requests.fetch_sub(1, std::memory_order_relaxed);
    counters_.reset();
  }

 private:
  friend class InFlightTracker;
  InFlightHandle(std::shared_ptr<detail::InFlightCounters> counters, std::int64_t tokens) noexcept
      : counters_(std::move(counters)), tokens_(tokens) {}

  std::shared_ptr<detail::InFlightCounters> counters_;
  std::int64_t tokens_ = 0;
};

class HOLDBACK_API InFlightTracker {
 public:
  // Counts one request with `tokens` tokens (negative -> 0) on `endpoint`.
  InFlightHandle dispatch(std::string_view endpoint, std::int64_t tokens = 0) noexcept;

  // The current counts of `endpoint` (0, 0 when unknown).
  [[nodiscard]] InFlightLoad load(std::string_view endpoint) const noexcept;

  // Sets inFlightRequests and inFlightTokens of every endpoint from its name.
  void fill(std::span<Endpoint> endpoints) const noexcept;

  // Forgets `endpoint`'s counters (see the header comment). Returns false when it was unknown.
  bool removeEndpoint(std::string_view endpoint);

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::shared_ptr<detail::InFlightCounters>, std::less<>> counters_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/in_flight_tracker-inl.hpp"
#endif
