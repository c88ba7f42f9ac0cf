// The flow controller under arbitrary sequences of enqueue, cancel, dispatchCycle, expire,
// desired-priority updates, hot reloads (reconfigure, valid or not), pool changes, clock jumps
// (forward and backward), saturation values (NaN and infinities included) and shutdown. Checks
// after every operation: every request handed to enqueue() ends with exactly one outcome,
// delivered once; cancel() succeeds exactly when the request had no outcome yet; a dispatch
// cycle delivers its dispatch plus its evictions and expire() what it says it evicted;
// reconfigure() finalizes nothing and a failed one changes no band; nothing is queued after
// shutdown; and the counters add up (queued = enqueued - delivered; the stats' outcome
// counters, global and summed over bands, equal the outcomes delivered, kind by kind).
// In-flight eviction (options with eviction on, release and updateLease operations): evict is
// called only for dispatched requests whose outcome was delivered, at most once per request, never
// after its lease ended, for sheddable priorities only, and as many times as the cycle reports;
// a revocation's release is its confirmation; the lease and revocation counters add up.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "check.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "holdback/flow/plugins/vtc_fairness.hpp"
#include "holdback/policy/policies.hpp"

namespace {

using namespace holdback;

using holdback::fuzz::Input;

class FakeDetector final : public SaturationDetector {
 public:
  FakeDetector() : SaturationDetector("fuzz") {}
  double saturation(std::span<const Endpoint> endpoints, TimePoint) const noexcept override {
    return endpoints.empty() ? 1.0 : value;
  }
  FilterResult filter(std::span<const Endpoint> endpoints, TimePoint,
                      std::span<std::size_t> out) const noexcept override {
    std::size_t n = 0;
    for (; n < endpoints.size() && n < out.size(); ++n) out[n] = n;
    return {n, false};
  }
  std::string_view type() const noexcept override { return "fuzz"; }
  double value = 0.0;  // written only between controller calls (single-threaded fuzzer)
};

constexpr Priority kPriorities[] = {0,
                                    1,
                                    -1,
                                    100,
                                    50,
                                    -50,
                                    std::numeric_limits<Priority>::max(),
                                    std::numeric_limits<Priority>::min()};
constexpr double kSaturations[] = {0.0,
                                   0.3,
                                   0.55,
                                   0.7,
                                   0.95,
                                   1.0,
                                   1.5,
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -1.0};

std::shared_ptr<UsageLimitPolicy> makePolicy(std::uint8_t kind) {
  switch (kind % 3) {
    case 0:
      return std::move(PriorityHoldbackPolicy::create(
                           {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.4}))
          .value();
    case 1:
      return std::move(SoftReflectiveCeilingPolicy::create()).value();
    default:
      return std::move(StaticUsageLimitPolicy::create()).value();
  }
}

// One program-aware instance for the whole run: the enqueue step reports tokens served to it, so
// its picks see attained service that changes between cycles.
const std::shared_ptr<ProgramAwareFairnessPolicy>& programAware() {
  static const std::shared_ptr<ProgramAwareFairnessPolicy> instance =
      std::move(
          ProgramAwareFairnessPolicy::create({.halfLife = std::chrono::milliseconds(50),
                                              .evictionTtl = std::chrono::milliseconds(200),
                                              .evictionSweep = std::chrono::milliseconds(20)}))
          .value();
  return instance;
}

std::shared_ptr<const FairnessPolicy> makeFairness(std::uint8_t kind) {
  switch (kind % 4) {
    case 0:
      return globalStrictFairness();
    case 1:
      return roundRobinFairness();
    case 2:
      return programAware();
    default:
      return vtcFairness();
  }
}

// Band weights drawn from a band's byte: 0 (derived), valid ones and two invalid (0.5, NaN).
constexpr double kFuzzBandWeights[] = {0.0, 1.0, 3.0, 0.0,
                                       2.5, 1e6, 0.5, std::numeric_limits<double>::quiet_NaN()};

std::shared_ptr<const OrderingPolicy> makeOrdering(std::uint8_t kind) {
  switch (kind % 3) {
    case 0:
      return fcfsOrdering();
    case 1:
      return edfOrdering();
    default:
      return sloDeadlineOrdering();
  }
}

// The options create() and reconfigure() take, from the fuzzer's bytes. Some are invalid
// (duplicate declared bands, bandIdleTimeout < flowIdleTimeout, a negative TTL): create() must
// reject them, and reconfigure() must reject them and change nothing.
FlowControllerOptions readOptions(Input& in, std::shared_ptr<const SaturationDetector> detector,
                                  std::shared_ptr<EndpointSource> pool) {
  FlowControllerOptions options;
  options.policy = makePolicy(in.byte());
  options.detector = std::move(detector);
  options.endpoints = std::move(pool);
  const std::uint8_t flags = in.byte();
  options.priorityDomain = (flags & 1) ? PriorityDomain::kActive : PriorityDomain::kProvisioned;
  options.provisionOnFirstUse = (flags & 2) != 0;
  const std::uint8_t max_bands = in.byte();
  options.maxBands = 1 + max_bands % 6;
  // Band scheduling from the same byte (the corpus keeps its meaning): strict or weighted-fair,
  // threshold 0.0 to 1.1 (1.0 and above invalid).
  options.bandScheduling = {.schedule = (max_bands / 6) % 2 != 0 ? BandSchedule::kWeightedFair
                                                                 : BandSchedule::kStrictPriority,
                            .activationThreshold = static_cast<double>(max_bands / 12 % 12) / 10};
  options.maxRequests = in.byte() % 12;
  options.maxBytes = (flags & 4) ? in.byte() * 16u : 0;
  options.defaultBand.maxRequests = in.byte() % 8;
  options.defaultBand.fairness = makeFairness(flags >> 5);
  options.defaultBand.ordering = makeOrdering(flags >> 6);
  options.defaultRequestTtl = std::chrono::milliseconds(in.byte() % 50);
  options.defaultBand.requestTtl = std::chrono::milliseconds(in.byte() % 30);
  if (flags & 8) options.noEndpointRequestTtl = std::chrono::milliseconds(in.byte() % 50 - 2);
  options.flowIdleTimeout = std::chrono::milliseconds(1 + in.byte() % 20);
  options.bandIdleTimeout = options.flowIdleTimeout + std::chrono::milliseconds(in.byte() % 20 - 1);
  if (flags & 128) {  // in-flight eviction
    const std::uint8_t e = in.byte();
    options.eviction.enabled = (e & 1) != 0;
    options.eviction.maxRevocationsPerDecision = e >> 5;  // 0 is invalid
    options.eviction.confirmationGrace = std::chrono::milliseconds(static_cast<int>(e & 6) - 1);
    options.eviction.confirmationTimeout = std::chrono::milliseconds((e >> 3) & 3);
    options.eviction.waitForReleases = {.enabled = (e & 8) != 0,
                                        .tolerance = std::chrono::milliseconds(e % 7)};
    options.eviction.footprintAware = (e & 16) != 0;
    // Reserve restoration (from the same byte: the corpus keeps its meaning); some invalid.
    options.eviction.restoreReserve = {.enabled = e % 3 == 0,
                                       .epsilon = e % 4 == 0 ? 0.7 : 0.01,
                                       .leadTime = std::chrono::milliseconds(e % 11 - 1),
                                       .burstMemory = std::chrono::seconds(e % 13 - 1)};
    options.eviction.revokeOnBlock = e % 5 != 0;
  }
  if (flags & 16) {
    for (int n = 1 + in.byte() % 3; n > 0; --n) {
      const std::uint8_t b = in.byte();
      options.bands.push_back({.priority = kPriorities[b % std::size(kPriorities)],
                               .maxRequests = static_cast<std::uint64_t>(b >> 4) % 5,
                               .fairness = makeFairness(b >> 3),
                               .ordering = makeOrdering(b >> 7),
                               // scoped TTLs: 0 = none, -1 ms invalid
                               .requestTtl = std::chrono::milliseconds(b % 7 - 1),
                               .weight = kFuzzBandWeights[(b >> 1) % 8]});
    }
  }
  return options;
}

// Per-request bookkeeping on the fuzzer's side.
struct Delivered {
  int count = 0;
  QueueOutcome kind = QueueOutcome::kDispatched;
};

// 0-2 endpoints with KV capacities unknown (0), negative or up to 25,500 tokens.
std::vector<Endpoint> fuzzPool(Input& in) {
  std::vector<Endpoint> pool(in.byte() % 3);
  for (Endpoint& e : pool) e.kvCapacityTokens = (static_cast<std::int64_t>(in.byte()) - 32) * 100;
  return pool;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using holdback::fuzz::require;
  Input in(data, size);
  auto detector = std::make_shared<FakeDetector>();
  auto pool = std::make_shared<VectorEndpointSource>();
  pool->set(fuzzPool(in));
  std::map<RequestId, Delivered> outcomes;
  std::uint64_t delivered = 0;
  std::array<std::uint64_t, kNumQueueOutcomes> delivered_by_kind{};

  // Eviction bookkeeping: evict calls per id, and the ids whose lease the fuzzer ended.
  std::map<RequestId, int> evicted;
  std::set<RequestId> released;
  std::uint64_t evict_calls = 0;
  std::uint64_t confirmations = 0;
  std::uint64_t releases = 0;

  FlowControllerOptions options = readOptions(in, detector, pool);
  options.eviction.evict = [&](const Revocation& r) {
    const auto it = outcomes.find(r.id);
    require(it != outcomes.end() && it->second.kind == QueueOutcome::kDispatched,
            "evict only for a request whose dispatch outcome was delivered");
    require(++evicted[r.id] == 1, "a lease is revoked at most once");
    require(released.count(r.id) == 0, "a released lease is never revoked");
    require(r.priority < 0, "the default filter revokes sheddable requests only");
    require(r.priority < r.demandPriority, "victims are strictly below the demand");
    require(r.disposition.status == 429 && r.disposition.dropReason == "evicted",
            "a victim's client is answered 429 evicted");
    ++evict_calls;
  };
  options.onOutcome = [&](Completion&& c) {
    Delivered& d = outcomes[c.id];
    ++d.count;
    d.kind = c.outcome.kind;
    ++delivered;
    ++delivered_by_kind[static_cast<std::size_t>(c.outcome.kind)];
  };
  // Reserve restoration revokes before a block (docs/guide/eviction.md): once it has been
  // configured in this run, a revocation need not come with a head-of-line block.
  const auto restores = [](const FlowControllerOptions& o) {
    return o.eviction.enabled && o.eviction.restoreReserve.enabled;
  };
  bool restoration_configured = restores(options);
  auto made = FlowController::create(std::move(options));
  if (!made) return 0;  // rejected options are fine
  std::unique_ptr<FlowController> controller = std::move(made).value();

  TimePoint now{};
  std::vector<Ticket> tickets;
  std::set<RequestId> ids;
  std::uint64_t enqueued = 0;
  bool stopped = false;
  for (int step = 0; step < 2000 && !in.empty(); ++step) {
    const std::uint64_t delivered_before = delivered;
    const std::uint64_t evicts_before = evict_calls;
    const int op = in.byte() % 13;
    switch (op) {
      case 0:
      case 1: {
        FlowRequest request;
        const std::uint8_t f = in.byte();
        request.flowId =
            (f % 5 == 4) ? std::string() : std::string(1, static_cast<char>('a' + f % 5));
        request.priority = kPriorities[in.byte() % std::size(kPriorities)];
        request.sizeBytes = in.byte();
        // KV footprints: undeclared, negative, small, larger than any endpoint, or huge.
        const std::uint8_t kv = in.byte();
        request.kvTokens = kv >= 250 ? std::numeric_limits<std::int64_t>::max() - kv
                                     : (static_cast<std::int64_t>(kv) - 16) * 150;
        const std::uint8_t t = in.byte();
        if (t & 1) request.ttl = std::chrono::milliseconds(static_cast<int>(t) - 64);
        if (t & 2) request.deadline = now + std::chrono::milliseconds(static_cast<int>(t) - 100);
        // TTFT objectives (negative ones included: no objective) and received times in the past
        // or the future.
        if (t & 4) request.ttftObjective = std::chrono::milliseconds(static_cast<int>(t) - 40);
        if (t & 8) request.receivedTime = now - std::chrono::milliseconds(static_cast<int>(t) - 60);
        if (t & 16) programAware()->recordServed(request.flowId, t, f, now);
        Ticket ticket = controller->enqueue(std::move(request), now);
        require(ticket.valid() && ids.insert(ticket.id()).second, "every ticket has a fresh id");
        require(delivered == delivered_before ||
                    (delivered == delivered_before + 1 && outcomes[ticket.id()].count == 1 &&
                     outcomes[ticket.id()].kind != QueueOutcome::kDispatched &&
                     outcomes[ticket.id()].kind <= QueueOutcome::kRejectedOther),
                "enqueue delivers nothing, or this request's rejection");
        if (stopped) {
          require(delivered == delivered_before + 1 &&
                      outcomes[ticket.id()].kind == QueueOutcome::kRejectedOther,
                  "enqueue after shutdown is rejected at once");
        }
        tickets.push_back(std::move(ticket));
        ++enqueued;
        break;
      }
      case 2:
        if (!tickets.empty()) {
          Ticket& ticket = tickets[in.byte() % tickets.size()];
          const auto it = outcomes.find(ticket.id());
          const bool had_outcome = it != outcomes.end() && it->second.count > 0;
          const bool cancelled = ticket.cancel();
          require(cancelled != had_outcome, "cancel succeeds iff the request had no outcome");
          require(delivered == delivered_before + (cancelled ? 1 : 0),
                  "a successful cancel delivers one outcome, a failed one none");
          if (cancelled) {
            require(outcomes[ticket.id()].kind == QueueOutcome::kEvictedCancelled,
                    "a cancelled request ends kEvictedCancelled");
          }
        }
        break;
      case 3:
      case 4: {
        const DispatchResult result = controller->dispatchCycle(now);
        const bool dispatched = result.kind == DispatchResult::Kind::kDispatched;
        require(delivered == delivered_before + result.evicted + (dispatched ? 1 : 0),
                "a cycle delivers its dispatch and its evictions");
        require(evict_calls == evicts_before + result.revoked,
                "a cycle calls evict once per revocation it reports");
        require(result.revoked == 0 || result.kind == DispatchResult::Kind::kGated ||
                    restoration_configured,
                "revocations happen only at a head-of-line block (without reserve restoration)");
        if (dispatched) {
          require(outcomes[result.id].kind == QueueOutcome::kDispatched,
                  "the dispatched request ends kDispatched");
        }
        require(!stopped || result.kind == DispatchResult::Kind::kStopped,
                "a stopped controller dispatches nothing");
        break;
      }
      case 5:
        require(controller->expire(now) == delivered - delivered_before,
                "expire returns the number of requests it evicted");
        break;
      case 6: {
        const std::uint8_t j = in.byte();
        now += (j & 0x80) ? -std::chrono::milliseconds(j & 0x0F) : std::chrono::milliseconds(j);
        break;
      }
      case 7:
        detector->value = kSaturations[in.byte() % std::size(kSaturations)];
        break;
      case 8: {
        std::vector<Priority> desired;
        for (int n = in.byte() % 4; n > 0; --n) {
          desired.push_back(kPriorities[in.byte() % std::size(kPriorities)]);
        }
        controller->setDesiredPriorities(desired);
        break;
      }
      case 9:
        if (in.byte() % 8 == 0) {
          controller->shutdown(now);
          stopped = true;
        } else {
          pool->set(fuzzPool(in));
        }
        break;
      case 11:
      case 12:
        if (!tickets.empty()) {
          const RequestId id = tickets[in.byte() % tickets.size()].id();
          const auto it = outcomes.find(id);
          const bool was_dispatched =
              it != outcomes.end() && it->second.kind == QueueOutcome::kDispatched;
          if (op == 12) {
            const bool updated = controller->ticket(id).updateLease(in.byte(), in.byte());
            require(!updated || was_dispatched, "only a dispatched request holds a lease");
            break;
          }
          const bool ended = controller->release(id, now);
          require(!ended || was_dispatched, "only a dispatched request's lease is released");
          require(!ended || released.insert(id).second, "a lease is released at most once");
          require(evict_calls == evicts_before, "release calls no host code");
          if (ended) {
            ++releases;
            if (evicted.count(id)) ++confirmations;
          }
        }
        break;
      case 10: {
        const std::vector<Priority> bands_before = controller->bandPriorities();
        FlowControllerOptions reloaded = readOptions(in, detector, pool);
        const bool reload_restores = restores(reloaded);
        const Diagnostics result = controller->reconfigure(std::move(reloaded));
        if (!result.hasErrors()) restoration_configured = restoration_configured || reload_restores;
        require(delivered == delivered_before, "reconfigure finalizes no request");
        if (result.hasErrors()) {
          require(controller->bandPriorities() == bands_before, "a failed reload changes no band");
        }
        break;
      }
    }
    // The counters add up: checked after every shutdown, pool change and reload, and every 8th
    // operation (stats() copies every band; after each step it made the target 6x slower).
    if (op < 9 && step % 8 != 7) continue;
    const FlowControllerStats stats = controller->stats();
    require(stats.queuedRequests == enqueued - delivered, "queued = enqueued - delivered");
    require(!stopped || stats.queuedRequests == 0, "nothing is queued after shutdown");
    std::array<std::uint64_t, kNumQueueOutcomes> by_band{};
    std::size_t queued_in_bands = 0;
    std::uint64_t bytes_in_bands = 0;
    for (const BandStats& band : stats.bands) {
      for (std::size_t k = 0; k < kNumQueueOutcomes; ++k) by_band[k] += band.outcomes[k];
      queued_in_bands += band.queuedRequests;
      bytes_in_bands += band.queuedBytes;
      std::uint64_t waits = 0;
      for (const std::uint64_t n : band.queueDurationBuckets) waits += n;
      require(waits == band.outcomes[static_cast<std::size_t>(QueueOutcome::kDispatched)],
              "one queue-wait observation per dispatched request");
    }
    require(stats.outcomes == delivered_by_kind, "stats count every outcome, kind by kind");
    require(by_band == delivered_by_kind, "the bands' outcome counters add up to the global ones");
    require(queued_in_bands == stats.queuedRequests && bytes_in_bands == stats.queuedBytes,
            "the bands' queues add up to the global queue");
    const EvictionStats& ev = stats.eviction;
    std::uint64_t ended = 0;
    for (const std::uint64_t n : ev.leaseEnds) ended += n;
    require(ev.leasesStarted == ended + ev.leases, "every lease is held or ended once");
    require(ev.issued == evict_calls, "every revocation reaches the host once");
    require(ev.confirmed + ev.timedOut + ev.outstanding == ev.issued,
            "every revocation is outstanding, confirmed or timed out");
    require(
        ev.confirmed == confirmations &&
            ev.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)] == confirmations,
        "a revoked lease's release is its confirmation");
    require(ev.leaseEnds[static_cast<std::size_t>(LeaseEnd::kReleased)] +
                    ev.leaseEnds[static_cast<std::size_t>(LeaseEnd::kRevokedConfirmed)] ==
                releases,
            "the lease ends count the releases");
    require(ev.pendingReclaim >= 0.0 && std::isfinite(ev.pendingReclaim),
            "the pending reclaim is finite and non-negative");
  }
  controller->shutdown(now);
  const FlowControllerStats stats = controller->stats();
  require(stats.queuedRequests == 0, "shutdown empties every queue");
  require(delivered == enqueued, "every request gets an outcome");
  for (const auto& [id, d] : outcomes) require(d.count == 1, "each outcome is delivered once");
  require(outcomes.size() == enqueued, "outcomes belong to distinct requests");
  std::uint64_t counted = 0;
  for (const std::uint64_t n : stats.outcomes) counted += n;
  require(counted == delivered, "stats count every outcome");
  return 0;
}
