// The gateway's view of its model servers: the scraped telemetry, the gateway's own in-flight
// counts, the EndpointSource the FlowController reads, and the least-loaded pick.
//
// The algorithm
//   Each endpoint has one scraper coroutine (scraper.hpp) that GETs /metrics
//   every interval and calls recordScrape / recordScrapeFailure. A successful scrape sets the
//   waiting queue, running count and KV-cache usage and stamps updateTime with the steady-clock
//   time the scrape completed; a failed one changes nothing but the error counters and `up`, so the
//   endpoint ages into staleness as the detector expects.
//
//   Scrape-lag credit (on by default): a request dispatched after a scrape was sent is not in that
//   scrape's numbers. Until the next scrape, each such dispatch counts as one more waiting request
//   of its endpoint in the snapshot the detector sees, so a burst inside one scrape interval
//   cannot all be admitted on one stale-but-fresh reading (the thundering herd of
//   docs/detectors.md). It errs on the safe side: a dispatched request that found a free slot is
//   still counted as waiting until the next scrape, at most one interval later.
//
//   pick(): the detector's filter over a fresh snapshot; among the kept endpoints (all of them
//   when the filter failed open or kept nothing) the one with, in order: the last scrape
//   succeeded, fewest gateway in-flight requests, smallest waiting queue, lowest index. The pick
//   increments the endpoint's in-flight count; release() decrements it.
//
// Locking
//   mu_ guards the telemetry; it is held only to copy numbers (never during network I/O, never
//   while calling the detector). pick_mu_ serializes pick() so that two dispatch decisions see
//   each other's in-flight increment. In-flight and dispatch counters are atomics.
//
// Thread safety: thread-safe (endpoints() is called by one FlowController at a time, as the
// EndpointSource contract allows).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway_http.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "prometheus_text.hpp"

namespace holdback::gateway {

class Pool final : public EndpointSource {
 public:
  // `urls` are "http://HOST:PORT"; `hosts` their parsed forms (same order).
  Pool(std::vector<std::string> urls, std::vector<HostPort> hosts, bool scrapeLagCredit);

  [[nodiscard]] std::size_t size() const noexcept { return states_.size(); }
  [[nodiscard]] const std::string& url(std::size_t i) const { return states_[i]->url; }
  [[nodiscard]] const HostPort& host(std::size_t i) const { return states_[i]->host; }

  // EndpointSource: the controller's snapshot (reused buffer, no allocation in steady state).
  std::span<const Endpoint> endpoints(TimePoint now) noexcept override;

  // Fills `out` (resized to size()) with the current telemetry; for pick() and /metrics.
  void snapshot(std::vector<Endpoint>& out) const;

  // The dispatch counter of endpoint i, to pass back to recordScrape (read before the scrape).
  [[nodiscard]] std::uint64_t dispatchCount(std::size_t i) const noexcept {
    return states_[i]->dispatches.load(std::memory_order_relaxed);
  }
  void recordScrape(std::size_t i, const VllmTelemetry& telemetry, TimePoint at,
                    std::uint64_t dispatchCountBefore, std::size_t skippedLines);
  void recordScrapeFailure(std::size_t i, std::size_t skippedLines = 0);
  // Whether the last scrape of endpoint i succeeded; anyUp(): of at least one (/readyz, and the
  // gateway's "no usable model server" 503).
  [[nodiscard]] bool up(std::size_t i) const;
  [[nodiscard]] bool anyUp() const;

  // THE endpoint choice (kept in this one function so that a shared picker can replace it): the
  // least-loaded endpoint (see the file comment); nullopt only for an empty pool.
  std::optional<std::size_t> pick(const SaturationDetector& detector, TimePoint now);
  void release(std::size_t i) noexcept;

  // For /metrics.
  struct Counters {
    std::uint64_t scrapes = 0;
    std::uint64_t scrapeErrors = 0;
    std::uint64_t skippedLines = 0;
    std::uint64_t dispatches = 0;
    bool up = false;
    std::optional<TimePoint> updateTime;
  };
  [[nodiscard]] Counters counters(std::size_t i) const;

 private:
  struct State {
    std::string url;
    HostPort host;
    // Guarded by mu_.
    std::optional<TimePoint> updateTime;
    double waiting = 0.0;
    double running = 0.0;
    double kvCacheUsage = 0.0;
    std::uint64_t dispatchesAtScrape = 0;
    bool up = false;
    std::uint64_t scrapes = 0;
    std::uint64_t scrapeErrors = 0;
    std::uint64_t skippedLines = 0;
    // Atomics.
    std::atomic<std::int64_t> inFlight{0};
    std::atomic<std::uint64_t> dispatches{0};
  };
  void fill(Endpoint& e, const State& s) const;  // requires mu_
  // The scrape-lag credit, in one place (the dispatch ledger replaces it): extra waiting requests
  // to add to endpoint s's scraped queue. Requires mu_.
  [[nodiscard]] double scrapeLagCredit(const State& s) const;

  const bool lag_credit_;
  std::vector<std::unique_ptr<State>> states_;
  mutable std::mutex mu_;
  std::vector<Endpoint> view_;  // endpoints()'s buffer (one controller thread at a time)
  std::mutex pick_mu_;
  std::vector<Endpoint> pick_view_;        // guarded by pick_mu_
  std::vector<std::size_t> pick_indices_;  // guarded by pick_mu_
  std::vector<char> pick_up_;              // guarded by pick_mu_
};

}  // namespace holdback::gateway
