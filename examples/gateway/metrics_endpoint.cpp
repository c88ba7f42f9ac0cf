#include "metrics_endpoint.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "holdback/detector/detectors.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"

namespace holdback::gateway {

std::string renderMetrics(Gateway& gw) {
  Pool* pool_ = &gw.pool();
  const SaturationDetector* detector_ = &gw.detector();
  GatewayCounters& gc = gw.counters();
  const FlowControllerStats stats = gw.controller().stats();
  std::string out = renderPrometheus(stats, "default");
  std::vector<Endpoint> snapshot;
  pool_->snapshot(snapshot);
  const TimePoint now = Clock::now();
  const bool scraped = detector_->metricsStalenessThreshold().has_value();
  if (scraped) {  // a detector of scraped telemetry
    out += renderStaleEndpoints(gw.staleEndpoints().update(*detector_, snapshot, now),
                                detector_->name(), "default");
  }

  // The library's writer: one escaper (backslash, quote and newline) and one number format for
  // the library's series, the gateway's and the model server's.
  PrometheusWriter writer;
  auto family = [&writer](const char* name, const char* type, const char* help) {
    writer.family(name, type, help);
  };
  auto sample = [&writer](const char* name, std::initializer_list<PrometheusWriter::Label> labels,
                          double value) { writer.sample(name, labels, value); };
  auto endpointLabel = [&](std::size_t i) {
    return PrometheusWriter::Label{"endpoint", pool_->url(i)};
  };

  family("holdback_gateway_responses_total", "counter",
         "Responses to completion requests, by HTTP status code.");
  for (std::size_t code = 0; code < gc.responses.size(); ++code) {
    const std::uint64_t n = gc.responses[code].load(std::memory_order_relaxed);
    if (n > 0)
      sample("holdback_gateway_responses_total", {{"code", std::to_string(code)}}, double(n));
  }
  family("holdback_gateway_upstream_failures_total", "counter",
         "Proxied requests whose upstream failed (502 before the response head, or a truncated "
         "body after it).");
  sample("holdback_gateway_upstream_failures_total", {},
         double(gc.upstreamFailures.load(std::memory_order_relaxed)));
  struct Global {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const Global globals[] = {
      {"holdback_gateway_upstream_aborted_total", "counter",
       "Upstream requests aborted because their client went away.",
       double(gc.upstreamAborted.load(std::memory_order_relaxed))},
      {"holdback_gateway_queued_cancelled_total", "counter",
       "Queued requests cancelled because their client went away.",
       double(gc.queuedCancelled.load(std::memory_order_relaxed))},
      {"holdback_gateway_upstream_connects_total", "counter",
       "New connections opened to model servers.",
       double(gc.upstreamConnects.load(std::memory_order_relaxed))},
      {"holdback_gateway_upstream_reuses_total", "counter",
       "Requests sent on a kept-alive (pooled) model-server connection.",
       double(gc.upstreamReuses.load(std::memory_order_relaxed))},
      {"holdback_gateway_upstream_desynced_total", "counter",
       "Model-server connections closed instead of reused because the server sent bytes past "
       "the end of its response.",
       double(gc.upstreamDesynced.load(std::memory_order_relaxed))},
      {"holdback_gateway_buffered_bytes", "gauge",
       "Bytes of request bodies and non-streamed responses the gateway holds now.",
       double(gw.bufferBudget().used())},
      {"holdback_gateway_buffered_bytes_limit", "gauge",
       "The budget of buffered bytes (--max-buffered-bytes) past which new requests get 503.",
       double(gw.bufferBudget().limit())},
      {"holdback_gateway_overload_shed_total", "counter",
       "Requests answered 503 because their body did not fit --max-buffered-bytes.",
       double(gc.overloadShed.load(std::memory_order_relaxed))},
      {"holdback_gateway_client_address_shed_total", "counter",
       "Client connections answered 503 and closed over --max-connections-per-client.",
       double(gc.clientAddressShed.load(std::memory_order_relaxed))},
      {"holdback_gateway_responses_too_large_total", "counter",
       "Non-streamed model-server responses over --max-response-bytes (answered 502).",
       double(gc.responsesTooLarge.load(std::memory_order_relaxed))},
      {"holdback_gateway_connections_open", "gauge", "Open client connections.",
       double(gc.connectionsOpen.load(std::memory_order_relaxed))},
      {"holdback_gateway_connections_shed_total", "counter",
       "Client connections answered 503 and closed because --max-connections were open.",
       double(gc.connectionsShed.load(std::memory_order_relaxed))},
      {"holdback_gateway_client_timeouts_total", "counter",
       "Client connections closed for a header, body or idle timeout.",
       double(gc.clientTimeouts.load(std::memory_order_relaxed))},
      {"holdback_gateway_client_errors_total", "counter",
       "Requests the gateway answered 4xx itself (malformed, too large, wrong method, ...).",
       double(gc.clientErrors.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_sync_rounds_total", "counter",
       "Replica sync rounds (--replica-sync) that published and read the other replicas.",
       double(gc.replicaSyncRounds.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_sync_failures_total", "counter",
       "Replica sync rounds that failed (store down or slow).",
       double(gc.replicaSyncFailures.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_sync_fallback", "gauge",
       "1 while the last replica sync round failed: the ledger counts the 1/R share.",
       double(gc.replicaSyncFallback.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_sync_replicas", "gauge",
       "Gateway replicas (this one included) the last successful replica sync round saw.",
       double(gc.replicaSyncReplicas.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_feed_live", "gauge",
       "1 while the replica feed delivers the other replicas' dispatches, completions and "
       "arrivals.",
       double(gc.replicaFeedLive.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_feed_sent_total", "counter",
       "Events this replica published on the replica feed.",
       double(gc.replicaFeedSent.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_feed_received_total", "counter",
       "Other replicas' events this replica applied from the replica feed.",
       double(gc.replicaFeedReceived.load(std::memory_order_relaxed))},
      {"holdback_gateway_replica_feed_dropped_total", "counter",
       "Events this replica could not publish (queue full, Redis down or slow).",
       double(gc.replicaFeedDropped.load(std::memory_order_relaxed))},
  };
  for (const Global& g : globals) {
    family(g.name, g.type, g.help);
    sample(g.name, {}, g.value);
  }
  family("holdback_gateway_replica_sync_rejected_total", "counter",
         "Values read back from Redis (replica sync and feed) that were ignored, by reason: "
         "malformed, not_finite, negative, out_of_range, time, too_long, too_many, wrong_type, "
         "fingerprint (a replica of another config under the same key prefix).");
  for (std::size_t r = 0; r < kRejectReasons; ++r) {
    sample("holdback_gateway_replica_sync_rejected_total",
           {{"reason", std::string(toString(RejectReason(r)))}},
           double(gc.replicaSyncRejected[r].load(std::memory_order_relaxed)));
  }
  family("holdback_gateway_replica_sync_foreign_replicas", "gauge",
         "Replicas under the same key prefix that the last replica sync round ignored: they "
         "publish another config fingerprint.");
  sample("holdback_gateway_replica_sync_foreign_replicas", {},
         double(gc.replicaSyncForeign.load(std::memory_order_relaxed)));
  if (gc.replicaReserveMode) {  // --replica-mode reserve (replica_reserve.hpp)
    const ReserveCounters& rc = gc.replicaReserve;
    const auto load = [](const auto& a) { return double(a.load(std::memory_order_relaxed)); };
    const struct {
      const char* name;
      const char* type;
      const char* help;
      double value;
    } reserve[] = {
        {"holdback_gateway_replica_reserve_active", "gauge",
         "1 while dispatches are booked in Redis (--replica-mode reserve); 0 while Redis fails "
         "and the replica dispatches on the local 1/R share.",
         load(rc.active)},
        {"holdback_gateway_replica_reserve_bookings_total", "counter",
         "Dispatches booked in Redis.", load(rc.bookings)},
        {"holdback_gateway_replica_reserve_refusals_total", "counter",
         "Booking calls that found no endpoint with room (the request parked or stayed parked).",
         load(rc.refusals)},
        {"holdback_gateway_replica_reserve_fallback_dispatches_total", "counter",
         "Dispatches made without a booking while Redis failed (the local 1/R share) or stalled "
         "(top band).",
         load(rc.fallbackDispatches)},
        {"holdback_gateway_replica_reserve_parked", "gauge",
         "Dispatched requests waiting for a booking now.", load(rc.parked)},
        {"holdback_gateway_replica_reserve_parked_expired_total", "counter",
         "Parked requests that ended by their TTL.", load(rc.parkedExpired)},
        {"holdback_gateway_replica_reserve_parked_abandoned_total", "counter",
         "Parked requests that ended because their client hung up.", load(rc.parkedAbandoned)},
        {"holdback_gateway_replica_reserve_live", "gauge",
         "This replica's dispatches in flight that it counts as booked (re-asserted every sync "
         "interval).",
         load(rc.live)},
        {"holdback_gateway_replica_reserve_expired_bookings_total", "counter",
         "Other replicas' booking lists this replica's bookings deleted: their heartbeat was gone.",
         load(rc.expiredBookings)},
        {"holdback_gateway_replica_reserve_failures_total", "counter",
         "Redis calls of the reserver that failed (each drops the connection).", load(rc.failures)},
        {"holdback_gateway_replica_reserve_lapses_total", "counter",
         "Bookings that found this replica's own heartbeat expired (stalled past the lease): its "
         "live dispatches were re-asserted, possibly past a server's slots for a moment.",
         load(rc.lapses)},
        {"holdback_gateway_replica_reserve_bad_entries_total", "counter",
         "Booking entries read back from Redis that were ignored (not an integer in range, a key "
         "of another type).",
         load(rc.badEntries)},
    };
    for (const auto& g : reserve) {
      family(g.name, g.type, g.help);
      sample(g.name, {}, g.value);
    }
    family("holdback_gateway_replica_reserve_dispatch_seconds", "histogram",
           "What booking added to a dispatch: from the controller's dispatch to its delivery, for "
           "requests booked at their first call.");
    std::array<std::uint64_t, ReserveCounters::kBuckets.size() + 1> counts{};
    for (std::size_t b = 0; b < counts.size(); ++b) {
      counts[b] = rc.latency[b].load(std::memory_order_relaxed);
    }
    writer.histogram("holdback_gateway_replica_reserve_dispatch_seconds", {},
                     ReserveCounters::kBuckets, counts,
                     rc.latencySum.load(std::memory_order_relaxed));
  }
  family("holdback_gateway_evictions_total", "counter",
         "Revocations (in-flight eviction) the gateway received: actuated (upstream request "
         "aborted; the client, unless gone, answered 429 evicted) or too_late (the request had "
         "already ended).");
  sample("holdback_gateway_evictions_total", {{"result", "actuated"}},
         double(gc.evictionsActuated.load(std::memory_order_relaxed)));
  sample("holdback_gateway_evictions_total", {{"result", "too_late"}},
         double(gc.evictionsTooLate.load(std::memory_order_relaxed)));
  // The controller's leases (one per dispatched request while eviction is on or the policy reads
  // demand): the gateway ends each one exactly once, so after a drain `held` is 0 and the ends
  // add up to the starts.
  family("holdback_gateway_leases_held", "gauge",
         "Controller leases held now (dispatched requests whose upstream exchange is not over).");
  sample("holdback_gateway_leases_held", {}, double(stats.eviction.leases));
  family("holdback_gateway_leases_started_total", "counter", "Controller leases started.");
  sample("holdback_gateway_leases_started_total", {}, double(stats.eviction.leasesStarted));
  family(
      "holdback_gateway_leases_ended_total", "counter",
      "Controller leases ended, by how: released, revoked-confirmed, revoked-timed-out, reaped.");
  for (std::size_t i = 0; i < stats.eviction.leaseEnds.size(); ++i) {
    sample("holdback_gateway_leases_ended_total", {{"end", std::string(toString(LeaseEnd(i)))}},
           double(stats.eviction.leaseEnds[i]));
  }
  family("holdback_gateway_pool_saturation", "gauge",
         "Pool saturation as the configured detector computes it now.");
  sample("holdback_gateway_pool_saturation", {}, detector_->saturation(snapshot, now));

  std::vector<Pool::Counters> counters;
  for (std::size_t i = 0; i < pool_->size(); ++i) counters.push_back(pool_->counters(i));
  struct PerEndpoint {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const Pool::Counters&, const Endpoint&, double age, bool stale);
  };
  static constexpr PerEndpoint kPerEndpoint[] = {
      {"holdback_gateway_scrapes_total", "counter", "Scrapes of the endpoint's /metrics.",
       [](const Pool::Counters& c, const Endpoint&, double, bool) { return double(c.scrapes); }},
      {"holdback_gateway_scrape_errors_total", "counter",
       "Failed scrapes (unreachable, non-200, or the dialect's gauges missing).",
       [](const Pool::Counters& c, const Endpoint&, double, bool) {
         return double(c.scrapeErrors);
       }},
      {"holdback_gateway_scrape_skipped_lines_total", "counter",
       "Malformed lines skipped while parsing the endpoint's metrics.",
       [](const Pool::Counters& c, const Endpoint&, double, bool) {
         return double(c.skippedLines);
       }},
      {"holdback_gateway_endpoint_up", "gauge", "1 when the last scrape succeeded.",
       [](const Pool::Counters& c, const Endpoint&, double, bool) { return c.up ? 1.0 : 0.0; }},
      {"holdback_gateway_endpoint_stale", "gauge",
       "1 when the detector treats the endpoint's metrics as stale or invalid.",
       [](const Pool::Counters&, const Endpoint&, double, bool stale) {
         return stale ? 1.0 : 0.0;
       }},
      {"holdback_gateway_endpoint_metrics_age_seconds", "gauge",
       "Seconds since the last successful scrape (+Inf: never).",
       [](const Pool::Counters&, const Endpoint&, double age, bool) { return age; }},
      {"holdback_gateway_endpoint_in_flight_requests", "gauge",
       "Requests the gateway has proxied to the endpoint and not yet seen finish.",
       [](const Pool::Counters&, const Endpoint& e, double, bool) {
         return double(e.inFlightRequests);
       }},
      {"holdback_gateway_endpoint_waiting_requests", "gauge",
       "The waiting queue the detector sees (scraped, corrected by the dispatch ledger).",
       [](const Pool::Counters&, const Endpoint& e, double, bool) { return e.waitingQueueSize; }},
      {"holdback_gateway_endpoint_kv_cache_usage", "gauge", "Scraped KV-cache usage (0..1).",
       [](const Pool::Counters&, const Endpoint& e, double, bool) { return e.kvCacheUsage; }},
      {"holdback_gateway_endpoint_dispatches_total", "counter",
       "Requests dispatched to the endpoint.",
       [](const Pool::Counters& c, const Endpoint&, double, bool) { return double(c.dispatches); }},
  };
  for (const PerEndpoint& m : kPerEndpoint) {
    family(m.name, m.type, m.help);
    for (std::size_t i = 0; i < pool_->size(); ++i) {
      const Pool::Counters& c = counters[i];
      // The counters are read after `now`: a scrape that landed in between is 0 s old, not
      // negative.
      const double age =
          c.updateTime ? std::max(0.0, std::chrono::duration<double>(now - *c.updateTime).count())
                       : std::numeric_limits<double>::infinity();
      const bool stale =
          scraped ? detector_->staleEndpoints(std::span(&snapshot[i], 1), now) > 0 : !c.up;
      sample(m.name, {endpointLabel(i), {"dialect", c.dialect.empty() ? "none" : c.dialect}},
             m.value(c, snapshot[i], age, stale));
    }
  }
  // What the pool learned of each endpoint's capacity (capacity.hpp), with where from.
  family("holdback_gateway_endpoint_slots", "gauge",
         "The endpoint's slot count in use (requests that run at once; 0 = not known yet), by "
         "source: endpoint, pool (settings), config (maxRunningRequests), estimate (scrapes).");
  std::vector<LearnedCapacity> learned;
  for (std::size_t i = 0; i < pool_->size(); ++i) learned.push_back(pool_->capacity(i));
  for (std::size_t i = 0; i < pool_->size(); ++i) {
    sample("holdback_gateway_endpoint_slots",
           {endpointLabel(i), {"source", std::string(toString(learned[i].slotSource))}},
           double(learned[i].slots));
  }
  family("holdback_gateway_endpoint_kv_capacity_tokens", "gauge",
         "The endpoint's KV-cache capacity in tokens (0 = unknown), by source: cache_config_info, "
         "absent, invalid, not-scraped.");
  for (std::size_t i = 0; i < pool_->size(); ++i) {
    sample("holdback_gateway_endpoint_kv_capacity_tokens",
           {endpointLabel(i), {"source", std::string(toString(learned[i].kvSource))}},
           double(learned[i].kvCapacityTokens));
  }
  // --api-keys (tenants.hpp): the key table and each tenant's requests.
  TenantDirectory& tenants = gw.tenants();
  if (tenants.enabled()) {
    const auto table = tenants.current();
    family("holdback_gateway_api_keys", "gauge", "API keys in the key table in use (--api-keys).");
    sample("holdback_gateway_api_keys", {}, table ? double(table->keys()) : 0.0);
    family("holdback_gateway_api_key_reloads_total", "counter",
           "Reloads of the key file on SIGHUP: ok (installed) or failed (the previous table "
           "kept).");
    sample("holdback_gateway_api_key_reloads_total", {{"result", "ok"}},
           double(tenants.reloadsOk.load(std::memory_order_relaxed)));
    sample("holdback_gateway_api_key_reloads_total", {{"result", "failed"}},
           double(tenants.reloadsFailed.load(std::memory_order_relaxed)));
    family("holdback_gateway_unauthorized_total", "counter",
           "Requests answered 401: no bearer key (missing) or one no tenant has (invalid).");
    sample("holdback_gateway_unauthorized_total", {{"reason", "missing"}},
           double(tenants.missing.load(std::memory_order_relaxed)));
    sample("holdback_gateway_unauthorized_total", {{"reason", "invalid"}},
           double(tenants.invalid.load(std::memory_order_relaxed)));
    const std::vector<TenantDirectory::Row> rows = tenants.rows();
    family("holdback_gateway_tenant_requests_total", "counter",
           "Requests authenticated with one of the tenant's keys.");
    for (const auto& r : rows) {
      sample("holdback_gateway_tenant_requests_total", {{"tenant", r.tenant}}, double(r.requests));
    }
    family("holdback_gateway_tenant_priority_clamped_total", "counter",
           "Requests whose objective was above the tenant's ceiling, served at the ceiling.");
    for (const auto& r : rows) {
      sample("holdback_gateway_tenant_priority_clamped_total", {{"tenant", r.tenant}},
             double(r.clamped));
    }
  }
  return out + writer.take();
}

}  // namespace holdback::gateway
