#include "gateway.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "holdback/detector/dispatch_ledger.hpp"
#include "lease_endpoint.hpp"

#include <nlohmann/json.hpp>

namespace holdback::gateway {

using namespace std::chrono_literals;

Gateway::Gateway(Options options, std::shared_ptr<const config::ConfigBundle> bundle)
    : options_(std::move(options)),
      bundle_(std::move(bundle)),
      buffer_budget_(options_.maxBufferedBytes > 0
                         ? static_cast<std::int64_t>(options_.maxBufferedBytes)
                         : defaultMaxBufferedBytes()),
      client_limit_(options_.maxConnectionsPerClient) {
  endpoint_models_.resize(options_.endpoints.size());
  for (const auto& [name, fairness] : bundle_->fairnessPolicies) {
    reports_served_ = reports_served_ || fairness->observesServed();
  }
}

Gateway::~Gateway() {
  if (dispatcher_) dispatcher_->stop();
}

bool Gateway::start() {
  detector_ = bundle_->controller.detector;
  // One DispatchLedger for the pool, from the file's flowControl.dispatchLedger; the slots the
  // detector declares per endpoint (the utilization detector's slot term) as its capacity.
  DispatchLedgerOptions ledger = bundle_->dispatchLedger;
  EndpointCapacity capacity;
  capacity.maxRunningRequests = detector_->configuredEndpointSlots();
  // Slots: the endpoint's own setting, else the pool-wide one, else the detector's (capacity.hpp).
  std::vector<SlotSettings> slots(options_.endpoints.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    slots[i].endpoint = i < options_.endpointSlots.size() ? options_.endpointSlots[i] : 0;
    slots[i].pool = options_.poolSlots;
  }
  // The slot estimate probes past the policy's fixed reserve (the reservation policy's
  // minReserve; capacity.hpp).
  std::int64_t probe_reserve = 0;
  if (bundle_->policy) {
    probe_reserve =
        static_cast<std::int64_t>(std::ceil(std::min(bundle_->policy->fixedReserve(), 1e6)));
  }
  // Replica sync splits each scrape's free room among the replicas but the reserve, which every
  // replica sees (DispatchLedgerOptions::sharedRoomSlots; per endpoint, rounded up).
  if (ledger.sharedRoomSlots == 0 && probe_reserve > 0 && !options_.endpoints.empty()) {
    const auto n = static_cast<std::int64_t>(options_.endpoints.size());
    ledger.sharedRoomSlots = (probe_reserve + n - 1) / n;
  }
  const auto log = [](std::string_view line) {
    std::fprintf(stderr, "holdback-gateway: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  // --replica-mode reserve: a booking below the top band leaves the policy's fixed reserve free.
  reserve_keep_ = probe_reserve;
  for (const auto& band : bundle_->controller.bands) top_band_ = std::max(top_band_, band.priority);
  // flowControl.routing: priority: the ledger counts requests in flight at the bands' priorities
  // (0 for requests outside them with the gate off), the picker prefers the fewest at or above.
  const bool priority_routing = bundle_->routing == Routing::kPriority;
  if (priority_routing) {
    ledger.priorityLevels = {0};
    for (const auto& band : bundle_->controller.bands)
      ledger.priorityLevels.push_back(band.priority);
  }
  pool_ = std::make_shared<Pool>(options_.endpointUrls, options_.endpoints, ledger, capacity,
                                 std::move(slots), log, probe_reserve, priority_routing);
  FlowControllerOptions fc = bundle_->controller;
  fc.endpoints = pool_;
  fc.onOutcome = [this](Completion&& c) { onOutcome(std::move(c)); };
  fc.runner.enabled = false;  // the Dispatcher drives the cycles (idle when nothing is queued)
  eviction_ = fc.eviction.enabled;
  if (eviction_) fc.eviction.evict = [this](const Revocation& r) { onRevocation(r); };
  auto created = FlowController::create(std::move(fc));
  if (!created) {
    std::fprintf(stderr, "holdback-gateway: %s\n", created.diagnostics().toString().c_str());
    return false;
  }
  controller_ = std::move(created).value();
  dispatcher_ = std::make_unique<Dispatcher>(*controller_, 1ms, 100ms);
  dispatcher_->start();
  warnAboutStaleness();
  return true;
}

void Gateway::shutdownController() {
  if (dispatcher_) dispatcher_->stop();
  if (controller_) controller_->shutdown();
}

void Gateway::onOutcome(Completion&& c) {
  auto* holder = std::any_cast<std::shared_ptr<OutcomeSink>>(&c.payload);
  const bool dispatched = c.outcome.dispatched();
  if (dispatcher_) dispatcher_->finalized(dispatched);
  if (holder == nullptr || !*holder) return;
  std::optional<Pool::Dispatch> dispatch;
  if (dispatched && eviction_) {
    // The lease's endpoint, for reserve restoration per endpoint.
    dispatch = pickForLease(*pool_, controller_->ticket(c.id), *detector_, c.finalizedAt,
                            (*holder)->kvTokens, c.bandPriority);
  } else if (dispatched) {
    dispatch = pool_->pick(*detector_, c.finalizedAt, (*holder)->kvTokens, c.bandPriority);
  }
  if (dispatched && eviction_) {
    std::lock_guard lock(leases_mu_);
    leases_[c.id] = *holder;
  }
  ReplicaReserver* reserver = reserver_.load(std::memory_order_acquire);
  if (dispatch && reserver != nullptr) {
    const bool top = c.bandPriority >= top_band_;
    // --replica-mode reserve: booked (or parked) on the reserver's thread, delivered from there;
    // while Redis fails, a band below the top waits there for room in the local share. The top
    // band goes out at once while Redis fails or its calls have stalled (kTopBandPatience).
    if (!top || (reserver->active() && !reserver->stalled())) {
      ReserveRequest r;
      r.id = c.id;
      r.sink = *holder;
      r.outcome = c.outcome;
      r.priority = c.bandPriority;
      r.enqueueTime = c.enqueueTime;
      r.kvTokens = (*holder)->kvTokens;
      r.keepFree = top ? 0 : reserve_keep_;
      r.top = top;
      r.deadline = parkDeadline(c.enqueueTime, (*holder)->ttl);
      r.dispatch = std::move(*dispatch);
      // Parked until booked: no eviction victim meanwhile (revoking it would free no slot).
      if (eviction_) (void)controller_->ticket(c.id).setParked(true);
      reserver->submit(std::move(r));
      return;
    }
    counters_.replicaReserve.fallbackDispatches.fetch_add(1, std::memory_order_relaxed);
    reserver->track(*dispatch, c.id);
  }
  (*holder)->deliver(c.outcome, std::move(dispatch), c.finalizedAt - c.enqueueTime);
}

std::optional<TimePoint> Gateway::parkDeadline(TimePoint enqueued,
                                               std::optional<Duration> own) const {
  // The smaller of the set (> 0) TTLs: the request's own and the configured default (unset:
  // kDefaultRequestTtl; 0: never).
  const Duration configured = bundle_->controller.defaultRequestTtl.value_or(kDefaultRequestTtl);
  std::optional<Duration> ttl;
  if (configured > Duration::zero()) ttl = configured;
  if (own && *own > Duration::zero() && (!ttl || *own < *ttl)) ttl = own;
  if (!ttl) return std::nullopt;
  return enqueued + *ttl;
}

void Gateway::reportServed(std::string_view flowId, std::uint64_t promptTokens,
                           std::uint64_t completionTokens, Duration queued) const {
  for (const auto& [name, fairness] : bundle_->fairnessPolicies) {
    if (fairness->observesServed()) {
      fairness->recordServed(flowId, promptTokens, completionTokens, Clock::now(), queued);
    }
  }
}

void Gateway::onRevocation(const Revocation& r) {
  std::shared_ptr<OutcomeSink> sink;
  {
    std::lock_guard lock(leases_mu_);
    if (const auto it = leases_.find(r.id); it != leases_.end()) sink = it->second.lock();
  }
  if (sink) {
    sink->revoke(r.disposition);
  } else {
    // The request ended (and its lease was released) between the decision and this call.
    counters_.evictionsTooLate.fetch_add(1, std::memory_order_relaxed);
  }
}

void Gateway::endLease(RequestId id) {
  if (eviction_) {
    std::lock_guard lock(leases_mu_);
    leases_.erase(id);
  }
  controller_->release(id, Clock::now());
  // The request's end may be what a gated request waits for (the ledger counts it completed,
  // the controller's lease is gone): retry the queue now, on this thread, instead of waking the
  // dispatch driver for its next tick. Nothing waits: two atomic loads.
  dispatcher_->dispatchNow();
}

std::string Gateway::programAwareState() const {
  std::string out = "{";
  for (const auto& [name, fairness] : bundle_->fairnessPolicies) {
    if (std::string state = fairness->dumpState(Clock::now()); !state.empty()) {
      out += (out.size() > 1 ? ", " : "") + nlohmann::json(name).dump() + ": " + state;
    }
  }
  return out + "}";
}

void Gateway::setEndpointModels(std::size_t endpoint, std::vector<std::string> ids) {
  std::lock_guard lock(models_mu_);
  if (endpoint < endpoint_models_.size()) endpoint_models_[endpoint] = std::move(ids);
}

std::vector<std::string> Gateway::models() const {
  if (!options_.models.empty()) return options_.models;
  std::set<std::string> all;
  std::lock_guard lock(models_mu_);
  for (const auto& ids : endpoint_models_) all.insert(ids.begin(), ids.end());
  return {all.begin(), all.end()};
}

int Gateway::retryAfter429() const {
  return retryAfterSeconds(std::size_t(std::max<std::int64_t>(0, dispatcher_->queued())),
                           dispatcher_->dispatchRate());
}

int Gateway::retryAfter503() const {
  const int ms = 4 * options_.scrapeIntervalMs;
  return std::max(1, (ms + 999) / 1000);
}

void Gateway::warnAboutStaleness() const {
  if (!bundle_->flowControlEnabled) {
    std::fprintf(stderr,
                 "holdback-gateway: warning: feature gate flowControl is off: requests are not "
                 "queued; priority < 0 is rejected 429 when saturation >= 1.0 (legacy mode)\n");
  }
  const std::optional<Duration> staleness = detector_->metricsStalenessThreshold();
  if (!staleness) return;
  const Duration threshold = *staleness;
  const Duration interval = std::chrono::milliseconds(options_.scrapeIntervalMs);
  if (interval >= threshold) {
    std::fprintf(stderr,
                 "holdback-gateway: warning: scrape interval %d ms >= metricsStalenessThreshold "
                 "%lld ms: the detector will see stale metrics most of the time and (with "
                 "stalenessPolicy saturated) hold back traffic (upstream issue #2514); make the "
                 "threshold several scrape intervals long\n",
                 options_.scrapeIntervalMs,
                 static_cast<long long>(
                     std::chrono::duration_cast<std::chrono::milliseconds>(threshold).count()));
  }
}

}  // namespace holdback::gateway
