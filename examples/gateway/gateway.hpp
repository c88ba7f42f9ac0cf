// The gateway's shared state: the config bundle, the endpoint pool, the flow controller and its
// dispatch driver, the counters /metrics reports, and the model list of GET /v1/models. The
// networking parts (http_server, upstream, scraper) all work on one Gateway.
//
// The outcome rendezvous: a request enqueues a FlowRequest whose payload is a
// shared_ptr<OutcomeSink>; the controller's outcome callback (on the dispatch thread, or inside
// enqueue for a rejection) picks the endpoint for a dispatch (Pool::pick, so the next dispatch
// decision sees the in-flight increment) and hands outcome and endpoint to the sink, which wakes
// the request's coroutine on its own I/O thread.
//
// In-flight eviction (flowControl.enableEviction, docs/guide/eviction.md): every dispatched
// request's sink is registered by its RequestId (onOutcome, before the sink learns of the dispatch,
// so the lease is findable as soon as it is revocable). The controller's evict callback (on the
// dispatch thread, no library lock held) looks the sink up and calls revoke(), which posts to the
// sink's I/O thread; there the exchange aborts its upstream request and answers 429 `evicted`, or
// ignores the revocation when the request has already ended. endLease() is the one place a
// lease ends: it unregisters the sink and calls FlowController::release (for a revoked lease,
// the confirmation). The host calls it exactly once per dispatched request, when the upstream
// exchange is torn down (or was never started).
//
// Thread safety: thread-safe (counters are atomics, the model list and the lease registry have
// their own mutexes, the key table is TenantDirectory's; start() and shutdown() are called by the
// main thread, and so is the key table's install on SIGHUP).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatcher.hpp"
#include "footprint.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/stale_endpoints.hpp"
#include "options.hpp"
#include "overload.hpp"
#include "pool.hpp"
#include "replica_input.hpp"
#include "replica_reserve.hpp"
#include "tenants.hpp"

namespace holdback::gateway {

// Receives one request's outcome. Called exactly once, from any thread.
class OutcomeSink {
 public:
  virtual ~OutcomeSink() = default;
  // `dispatch`: the endpoint and its ledger handle when dispatched (the sink holds the handle for
  // the whole upstream exchange).
  virtual void deliver(Outcome outcome, std::optional<Pool::Dispatch> dispatch,
                       Duration queued) = 0;
  // In-flight eviction revoked this dispatched request: abort it upstream and answer its client
  // `disposition` (or ignore it if the request already ended). Called from the dispatch thread,
  // at most once, after deliver().
  virtual void revoke(HttpDisposition disposition) = 0;

  // The request's declared KV footprint (FlowRequest::kvTokens), for the endpoint pick; set
  // before the request is enqueued.
  std::int64_t kvTokens = 0;
  // Its own TTL (x-llm-d-inference-ttl), when given: a parked request (--replica-mode reserve)
  // ends by the smaller of it and the configured default. Set before the request is enqueued.
  std::optional<Duration> ttl;
  // Set (from the request's thread) when its client hangs up before the outcome: a parked
  // request then ends at once.
  std::atomic<bool> abandoned{false};
};

struct GatewayCounters {
  std::array<std::atomic<std::uint64_t>, 600> responses{};  // completion requests, by status
  std::atomic<std::uint64_t> upstreamFailures{0};           // 502 or truncated stream
  std::atomic<std::uint64_t> upstreamAborted{0};   // upstream requests aborted: client gone
  std::atomic<std::uint64_t> queuedCancelled{0};   // queued requests cancelled: client gone
  std::atomic<std::uint64_t> upstreamConnects{0};  // new upstream connections
  std::atomic<std::uint64_t> upstreamReuses{0};    // requests on a kept-alive connection
  std::atomic<std::uint64_t> upstreamDesynced{0};  // closed: bytes past the response's end
  std::atomic<std::int64_t> connectionsOpen{0};
  std::atomic<std::uint64_t> connectionsShed{0};  // over --max-connections: 503 + close
  std::atomic<std::uint64_t> clientTimeouts{0};   // header/body/idle timeouts
  std::atomic<std::uint64_t> clientErrors{0};     // 4xx the gateway answered itself
  std::atomic<std::uint64_t> overloadShed{0};     // 503: the body did not fit --max-buffered-bytes
  std::atomic<std::uint64_t> clientAddressShed{0};   // over --max-connections-per-client
  std::atomic<std::uint64_t> responsesTooLarge{0};   // 502: over --max-response-bytes
  std::atomic<std::int64_t> exchangesInProgress{0};  // requests read and not yet answered
  std::atomic<std::uint64_t> evictionsActuated{0};   // revoked: upstream aborted (+ 429 evicted)
  std::atomic<std::uint64_t> evictionsTooLate{0};    // revoked after the request had ended
  // Replica sync (replica_sync_redis.hpp): rounds that succeeded and failed, whether the last
  // one failed (the ledger on the 1/R share), and the replicas the last success saw.
  std::atomic<std::uint64_t> replicaSyncRounds{0};
  std::atomic<std::uint64_t> replicaSyncFailures{0};
  std::atomic<std::int64_t> replicaSyncFallback{0};
  std::atomic<std::int64_t> replicaSyncReplicas{0};
  // The replica feed (replica_feed.hpp): whether it is live, events published, received from the
  // others and dropped (a full queue, a failed publish).
  std::atomic<std::int64_t> replicaFeedLive{0};
  std::atomic<std::uint64_t> replicaFeedSent{0};
  std::atomic<std::uint64_t> replicaFeedReceived{0};
  std::atomic<std::uint64_t> replicaFeedDropped{0};
  // Values read back from Redis that were ignored, by reason (replica_input.hpp), and the
  // replicas the last sync round ignored for publishing another config fingerprint.
  RejectCounters replicaSyncRejected{};
  std::atomic<std::int64_t> replicaSyncForeign{0};
  // --replica-mode reserve (replica_reserve.hpp).
  ReserveCounters replicaReserve{};
  bool replicaReserveMode = false;  // set before serving: the reserve families are exported

  void count(int status) noexcept {
    if (status >= 0 && status < int(responses.size())) {
      responses[std::size_t(status)].fetch_add(1, std::memory_order_relaxed);
    }
  }
};

class Gateway {
 public:
  Gateway(Options options, std::shared_ptr<const config::ConfigBundle> bundle);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Creates the controller and starts the dispatch driver; false (printed) on failure.
  bool start();
  // Queued requests are answered 503 rejected-shutting-down; later ones are rejected the same way.
  void shutdownController();

  [[nodiscard]] const Options& options() const { return options_; }
  [[nodiscard]] const config::ConfigBundle& bundle() const { return *bundle_; }
  [[nodiscard]] Pool& pool() { return *pool_; }
  [[nodiscard]] const SaturationDetector& detector() const { return *detector_; }
  [[nodiscard]] FlowController& controller() { return *controller_; }
  [[nodiscard]] Dispatcher& dispatcher() { return *dispatcher_; }
  [[nodiscard]] GatewayCounters& counters() { return counters_; }
  // Overload protection (overload.hpp): the buffered bytes' budget (--max-buffered-bytes) and the
  // open connections per client address (--max-connections-per-client).
  [[nodiscard]] BufferBudget& bufferBudget() { return buffer_budget_; }
  [[nodiscard]] ClientAddressLimit& clientLimit() { return client_limit_; }
  // --api-keys: the live key table and the per-tenant counters (tenants.hpp).
  [[nodiscard]] TenantDirectory& tenants() { return tenants_; }

  // GET /v1/models: --model names when given, else the union of what the model servers list.
  void setEndpointModels(std::size_t endpoint, std::vector<std::string> ids);
  // A dispatched request completed: report its tokens to every program-aware-fairness policy of
  // the bundle (input + 2 x output tokens of attained service for program `flowId`).
  void reportServed(std::string_view flowId, std::uint64_t promptTokens,
                    std::uint64_t completionTokens, Duration queued) const;
  // Whether any policy of the bundle takes served tokens (program-aware-fairness): only then are
  // responses read for their "usage".
  [[nodiscard]] bool reportsServedTokens() const noexcept { return reports_served_; }
  // {"<plugin name>": <dumpState JSON>, ...} for every program-aware-fairness policy.
  [[nodiscard]] std::string programAwareState() const;
  // The stale-endpoints gauge's monitor (logs to stderr at most every 30 s while any is stale).
  [[nodiscard]] StaleEndpointMonitor& staleEndpoints() const { return stale_endpoints_; }
  [[nodiscard]] std::vector<std::string> models() const;
  // Each band's output tokens learned from completions without max_tokens (footprint.hpp).
  [[nodiscard]] OutputEstimator& outputEstimator() const noexcept { return *output_estimator_; }

  // --replica-mode reserve: where dispatched requests are booked (nullptr: share mode, the
  // default). Set before serving, cleared before the reserver is destroyed.
  void setReserver(ReplicaReserver* reserver) noexcept {
    reserver_.store(reserver, std::memory_order_release);
  }

  // Whether in-flight eviction is on (flowControl.enableEviction).
  [[nodiscard]] bool evictionEnabled() const noexcept { return eviction_; }
  // Ends dispatched request `id`'s lease at most once per registration: unregisters its sink and
  // calls FlowController::release(id, now). Call once per dispatched request, when its upstream
  // exchange is over.
  void endLease(RequestId id);

  // Retry-After for a 429 now (gateway_http.hpp retryAfterSeconds).
  [[nodiscard]] int retryAfter429() const;
  // Retry-After when no model server is usable: a few scrape intervals, at least 1 s.
  [[nodiscard]] int retryAfter503() const;

 private:
  void onOutcome(Completion&& c);
  // When a request enqueued at `enqueued`, parked (--replica-mode reserve), ends by its TTL.
  [[nodiscard]] std::optional<TimePoint> parkDeadline(TimePoint enqueued,
                                                      std::optional<Duration> own) const;
  void onRevocation(const Revocation& r);
  void warnAboutStaleness() const;

  Options options_;
  std::shared_ptr<const config::ConfigBundle> bundle_;
  mutable StaleEndpointMonitor stale_endpoints_{[](std::string_view line) {
    std::fprintf(stderr, "holdback-gateway: warning: %.*s\n", static_cast<int>(line.size()),
                 line.data());
  }};
  std::shared_ptr<Pool> pool_;
  std::shared_ptr<const SaturationDetector> detector_;
  std::unique_ptr<FlowController> controller_;
  std::unique_ptr<Dispatcher> dispatcher_;
  GatewayCounters counters_;
  BufferBudget buffer_budget_;
  ClientAddressLimit client_limit_;
  TenantDirectory tenants_;
  mutable std::mutex models_mu_;
  std::vector<std::vector<std::string>> endpoint_models_;  // guarded by models_mu_
  bool eviction_ = false;                                  // set by start()
  bool reports_served_ = false;                            // set by the constructor
  std::mutex leases_mu_;
  std::unordered_map<RequestId, std::weak_ptr<OutcomeSink>> leases_;  // guarded by leases_mu_
  std::unique_ptr<OutputEstimator> output_estimator_ = makeOutputEstimator();
  std::atomic<ReplicaReserver*> reserver_{nullptr};
  std::int64_t reserve_keep_ = 0;                             // set by start()
  Priority top_band_ = std::numeric_limits<Priority>::min();  // set by start()
};

}  // namespace holdback::gateway
