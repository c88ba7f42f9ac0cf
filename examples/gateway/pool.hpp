// The gateway's view of its model servers: one holdback::DispatchLedger (the library's in-flight
// mechanism and scrape-lag correction), the EndpointSource the FlowController reads, and the pick
// through holdback::EndpointPicker (the same picker the simulator uses).
//
// The algorithm
//   Each endpoint has one scraper coroutine (scraper.hpp) that takes mark(i) (the ledger's
//   counters) right before it sends GET /metrics, and then calls recordScrape(i, ..., mark) or
//   recordScrapeFailure(i). A successful scrape installs the telemetry in the ledger stamped with
//   the steady-clock time it completed; a failed one changes nothing but the error counters and
//   `up`, so the endpoint ages into staleness as the detector expects.
//
//   Every snapshot (endpoints() for the FlowController, snapshot() for /metrics and the legacy
//   path, pick()) is filled through DispatchLedger::fill: requests dispatched since the scrape's
//   mark and not yet completed count as running (or waiting beyond the slot count: configured,
//   else the largest running figure the scrapes have shown; all waiting before that), so a
//   burst inside one scrape interval is not admitted on one stale-but-fresh reading, and
//   completions since the mark offset them (docs/guide/detectors.md, "The dispatch ledger").
//
//   pick(): EndpointPicker::pick over a fresh snapshot and the `up` flags; the pick takes a
//   DispatchHandle from the ledger, which the caller holds for the whole upstream exchange. With
//   priority routing (the file's flowControl.routing: priority) the ledger counts the requests
//   in flight by priority (its priorityLevels: the configured bands) and the picker prefers the
//   endpoint with the fewest of the request's priority or above (EndpointPicker rule 4a).
//
// Locking
//   mu_ guards the scrape counters and `up`; it is held only to copy numbers (never during
//   network I/O, never while calling the detector). pick_mu_ serializes pick() (the picker's
//   round-robin cursor and the scratch buffers). The ledger is lock-free on these paths.
//
// Thread safety: thread-safe (endpoints() is called by one FlowController at a time, as the
// EndpointSource contract allows).
// Capacity: a CapacityLearner (capacity.hpp) turns the scrapes' cache_config_info and running
// figures into each endpoint's EndpointCapacity in the ledger; pick() routes with
// EndpointPicker's fitFirst rule (where the request starts now), using the declared footprint.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capacity.hpp"
#include "gateway_http.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/endpoint_picker.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "vllm_telemetry.hpp"

namespace holdback::gateway {
class ReplicaFeedSink;  // replica_feed.hpp
class ReservationSink;  // replica_reserve.hpp
}  // namespace holdback::gateway

namespace holdback::gateway {

class Pool final : public EndpointSource {
 public:
  // `urls` are "http://HOST:PORT"; `hosts` their parsed forms (same order).
  // `ledger` and `capacity` configure the DispatchLedger (capacity applies to every endpoint;
  // its maxRunningRequests counts as the config's slot setting). `slots`, when not empty, holds
  // each endpoint's slot settings (capacity.hpp; its `config` entries override `capacity`'s).
  // `log` receives what the pool learns of the endpoints' capacity (one line per change);
  // `probeReserve` widens the slot estimate's probe (CapacityLearner). `priorityRouting`: route
  // by priority (EndpointPickerOptions::priorityRouting); set ledger.priorityLevels with it.
  Pool(std::vector<std::string> urls, std::vector<HostPort> hosts,
       DispatchLedgerOptions ledger = {}, EndpointCapacity capacity = {},
       std::vector<SlotSettings> slots = {}, CapacityLearner::Log log = {},
       std::int64_t probeReserve = 0, bool priorityRouting = false);

  [[nodiscard]] std::size_t size() const noexcept { return states_.size(); }
  [[nodiscard]] const std::string& url(std::size_t i) const { return states_[i]->url; }
  [[nodiscard]] const HostPort& host(std::size_t i) const { return states_[i]->host; }

  // EndpointSource: the controller's snapshot (reused buffer, no allocation in steady state).
  std::span<const Endpoint> endpoints(TimePoint now) noexcept override;

  // Fills `out` (resized to size()) with the current telemetry; for pick() and /metrics.
  void snapshot(std::vector<Endpoint>& out) const;

  // The ledger's counters of endpoint i: take it right before sending GET /metrics and pass it
  // back to recordScrape.
  [[nodiscard]] ScrapeMark mark(std::size_t i) const noexcept { return ledger_.mark(ids_[i]); }
  void recordScrape(std::size_t i, const VllmTelemetry& telemetry, TimePoint at,
                    const ScrapeMark& mark, std::size_t skippedLines);
  void recordScrapeFailure(std::size_t i, std::size_t skippedLines = 0);
  // A successful scrape's cache configuration and the capacity its engine reports (capacity.hpp):
  // installs a changed capacity in the ledger. Call after recordScrape with the same scrape's
  // telemetry (its running, waiting and reported figures).
  void recordCapacity(std::size_t i, const CacheConfigInfo& info, const VllmTelemetry& telemetry);
  // What the pool knows of endpoint i's capacity (the slot count and KV capacity in the ledger).
  [[nodiscard]] LearnedCapacity capacity(std::size_t i) const;
  // Whether the last scrape of endpoint i succeeded; anyUp(): of at least one (/readyz, and the
  // gateway's "no usable model server" 503).
  [[nodiscard]] bool up(std::size_t i) const;
  [[nodiscard]] bool anyUp() const;
  // The metric dialect the scraper reads endpoint i with ("" until one is known); for /metrics.
  void setDialect(std::size_t i, const std::string& dialect);

  // One dispatch: the endpoint and the ledger's handle for it. Hold the handle for the whole
  // upstream exchange; releasing (or destroying) it completes the request in the ledger.
  struct Dispatch {
    std::size_t endpoint = 0;
    DispatchHandle handle;
    // The replica feed's completion event (replica_feed.hpp): sent once, by release() or when the
    // Dispatch is destroyed.
    class FeedCompletion {
     public:
      FeedCompletion() = default;
      FeedCompletion(ReplicaFeedSink* sink, std::size_t endpoint, std::int64_t tokens) noexcept
          : sink_(sink), endpoint_(endpoint), tokens_(tokens) {}
      FeedCompletion(FeedCompletion&& o) noexcept
          : sink_(std::exchange(o.sink_, nullptr)), endpoint_(o.endpoint_), tokens_(o.tokens_) {}
      FeedCompletion& operator=(FeedCompletion&& o) noexcept {
        if (this != &o) {
          send();
          sink_ = std::exchange(o.sink_, nullptr);
          endpoint_ = o.endpoint_;
          tokens_ = o.tokens_;
        }
        return *this;
      }
      ~FeedCompletion() { send(); }
      void send() noexcept;

     private:
      ReplicaFeedSink* sink_ = nullptr;
      std::size_t endpoint_ = 0;
      std::int64_t tokens_ = 0;
    };
    FeedCompletion feedCompletion;
    // The booking's release (--replica-mode reserve, replica_reserve.hpp): sent once, by release()
    // or when the Dispatch is destroyed; none when `sink` is null.
    class BookingRelease {
     public:
      BookingRelease() = default;
      BookingRelease(ReservationSink* sink, std::uint64_t booking) noexcept
          : sink_(sink), booking_(booking) {}
      BookingRelease(BookingRelease&& o) noexcept
          : sink_(std::exchange(o.sink_, nullptr)), booking_(o.booking_) {}
      BookingRelease& operator=(BookingRelease&& o) noexcept {
        if (this != &o) {
          send();
          sink_ = std::exchange(o.sink_, nullptr);
          booking_ = o.booking_;
        }
        return *this;
      }
      ~BookingRelease() { send(); }
      void send() noexcept;

     private:
      ReservationSink* sink_ = nullptr;
      std::uint64_t booking_ = 0;
    };
    BookingRelease booking;
    // Completes the request in the ledger (and on the replica feed), and releases its booking.
    void release() noexcept {
      handle.release();
      feedCompletion.send();
      booking.send();
    }
  };
  // THE endpoint choice: EndpointPicker over a ledger-filled snapshot; nullopt only for an empty
  // pool.
  // `kvTokens`: the request's declared KV footprint (FlowRequest::kvTokens; 0 = not declared):
  // the picker's start test (EndpointPicker fitFirst) and the ledger's tokens in flight.
  // `priority`: the request's (its band's); the ledger counts it there, and with priority
  // routing the pick reads the requests in flight of that priority or above.
  std::optional<Dispatch> pick(const SaturationDetector& detector, TimePoint now,
                               std::int64_t kvTokens = 0, Priority priority = 0);
  // A dispatch to endpoint i chosen elsewhere (a booking: replica_reserve.hpp): the ledger's
  // handle and the feed's event, as pick() takes them.
  Dispatch dispatchTo(std::size_t i, std::int64_t kvTokens, Priority priority = 0);
  // The requests in flight to endpoint i of `priority` or above (0 without priority routing).
  [[nodiscard]] std::int64_t inFlightAtOrAbove(std::size_t i, Priority priority) const noexcept {
    std::int64_t n = 0;
    ledger_.inFlightAtOrAbove(std::span(&ids_[i], 1), priority, std::span(&n, 1));
    return n;
  }
  // Endpoint i's last successful scrape as the reservation reads it: slots in use (running +
  // waiting) and the KV cache in use (a fraction); zeros before the first one.
  struct ScrapedUse {
    double slotsInUse = 0.0;
    double kvCacheUsage = 0.0;
  };
  [[nodiscard]] ScrapedUse scraped(std::size_t i) const;
  // The gateway's requests in flight to endpoint i (dispatched, handle not yet released).
  [[nodiscard]] std::int64_t inFlight(std::size_t i) const noexcept {
    return ledger_.load(ids_[i]).requests;
  }

  // The replica feed (replica_feed.hpp): every pick and every Dispatch's release is sent to it.
  // Set it before serving (nullptr: none, the default).
  void setFeed(ReplicaFeedSink* feed) noexcept { feed_.store(feed, std::memory_order_release); }
  [[nodiscard]] ReplicaFeedSink* feed() const noexcept {
    return feed_.load(std::memory_order_acquire);
  }

  // The ledger and endpoint i's id in it (replica sync, replica_sync_redis.hpp).
  [[nodiscard]] DispatchLedger& ledger() noexcept { return ledger_; }
  [[nodiscard]] EndpointId ledgerId(std::size_t i) const noexcept { return ids_[i]; }

  // For /metrics.
  struct Counters {
    std::uint64_t scrapes = 0;
    std::uint64_t scrapeErrors = 0;
    std::uint64_t skippedLines = 0;
    std::uint64_t dispatches = 0;
    bool up = false;
    std::optional<TimePoint> updateTime;
    std::string dialect;
  };
  [[nodiscard]] Counters counters(std::size_t i) const;

 private:
  struct State {
    std::string url;
    HostPort host;
    // Guarded by mu_.
    std::optional<TimePoint> updateTime;
    bool up = false;
    std::uint64_t scrapes = 0;
    std::uint64_t scrapeErrors = 0;
    std::uint64_t skippedLines = 0;
    std::string dialect;
    ScrapedUse scraped;
    // Atomics.
    std::atomic<std::uint64_t> dispatches{0};
  };

  CapacityLearner capacity_;
  DispatchLedger ledger_;
  std::vector<EndpointId> ids_;  // per endpoint; fixed after construction
  std::vector<std::unique_ptr<State>> states_;
  mutable std::mutex mu_;
  std::vector<Endpoint> view_;  // endpoints()'s buffer (one controller thread at a time)
  std::atomic<ReplicaFeedSink*> feed_{nullptr};
  std::mutex pick_mu_;
  EndpointPicker picker_;                 // guarded by pick_mu_
  std::vector<Endpoint> pick_view_;       // guarded by pick_mu_
  std::vector<std::uint8_t> pick_up_;     // guarded by pick_mu_
  std::vector<std::int64_t> pick_above_;  // guarded by pick_mu_; priority routing's counts
};

}  // namespace holdback::gateway
