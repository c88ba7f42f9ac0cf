// Scenarios of the simulator behind `holdback simulate`: the pool, the traffic classes and the run
// settings, the built-in catalog and the scenario-file reader (keys in docs/simulation.md).
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"
#include "holdback/policy/usage_limit_policy.hpp"
#include "sim/pool_timing.hpp"
#include "sim/trace.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// kTrace: the arrivals and token sizes of a recorded trace (src/sim/trace.hpp,
// docs/guide/traces.md).
enum class ArrivalProcess { kPoisson, kOnOff, kBacklog, kTrace };

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::kPoisson;
  double rate = 1.0;  // requests/s (Poisson), or during the on phase (on/off)
  double offRate = 0.0;
  double onSeconds = 30.0;
  double offSeconds = 30.0;
  std::int64_t backlog = 0;  // outstanding requests (closed loop)
  double rampSeconds = 0.0;  // the initial backlog arrives evenly spread over [0, ramp)
  bool startOff = false;     // on/off: the first phase is the off phase (default: on)
  // Trace: the file (resolved), its format, the trace time the run starts at (seed 1; each seed
  // more shifts it by kTraceSeedStrideSeconds), the rate multiplier (2 = twice as fast), and the
  // trace itself, read once and shared by every copy of the scenario.
  std::string traceFile;
  TraceFormat traceFormat = TraceFormat::kAzure;
  double startSeconds = 0.0;
  double timeScale = 1.0;
  std::shared_ptr<const Trace> trace;
};

enum class LengthDistribution { kFixed, kUniform, kExponential };

// Token counts, always >= 1. Uniform draws integers in [min, max]; exponential has mean `mean`.
struct LengthSpec {
  LengthDistribution distribution = LengthDistribution::kFixed;
  double mean = 128.0;
  std::int64_t min = 1;
  std::int64_t max = 1;
};

struct TrafficClass {
  std::string name;
  Priority priority = 0;
  ArrivalSpec arrival;
  LengthSpec inputTokens{.mean = 512.0};
  LengthSpec outputTokens{.mean = 128.0};
  double ttlSeconds = 0.0;  // 0 = the controller's default (60 s)
  // false: the requests declare no output limit (no max_tokens); the gateway declares input + the
  // class's output learned from its completions (OutputEstimator: p90, 16 tokens until 8 have
  // completed) instead of input + the drawn output.
  bool declaresOutput = true;
};

enum class ServiceModel { kTokens, kExponential };
enum class DetectorKind { kUtilization, kConcurrency };
// "utilization", "concurrency".
[[nodiscard]] std::string_view toString(DetectorKind kind) noexcept;
// What the concurrency detector counts (ConcurrencyDetectorOptions::mode): requests against the
// slots, tokens against the KV capacity, or the per-endpoint roofline of both.
enum class CountedResource { kRequests, kTokens, kHybrid };
// "requests", "tokens", "hybrid".
[[nodiscard]] std::string_view toString(CountedResource mode) noexcept;

// How each model server orders its waiting requests (pool.engineScheduling; docs/simulation.md,
// "Engine scheduling"). kFcfs: first come, first served (the default). kPriority: by the
// request's priority, highest first, FIFO within a priority, no preemption for a waiting request
// (vLLM V1's --scheduling-policy priority as released). kPriorityPreempt: the same order, and a
// waiting request that does not fit (slots or KV) preempts the running request of the lowest
// priority, most recently arrived, below its own, which loses its KV and runs its prefill again
// over its prompt and the tokens it generated (vLLM V0's priority preemption, recompute mode).
// The gateway is assumed to send the priority (flowControl.enginePriority).
enum class EngineScheduling { kFcfs, kPriority, kPriorityPreempt };
// "fcfs", "priority", "priority-preempt".
[[nodiscard]] std::string_view toString(EngineScheduling mode) noexcept;
// The mode `text` names, or false.
[[nodiscard]] bool parseEngineScheduling(std::string_view text, EngineScheduling& out) noexcept;

// How gateway replicas coordinate (pool.replicaMode): kShare, figures shared every sync interval
// and on the replica feed; kReserve, an authoritative reservation table (docs/design/replicas.md).
enum class ReplicaMode { kShare, kReserve };
[[nodiscard]] std::string_view toString(ReplicaMode mode) noexcept;
// The gateway's replica defaults, which reserve mode runs on (its --replica-sync interval; the
// feed on).
inline constexpr double kGatewayReplicaSyncMs = 20.0;

// One group of identical endpoints in a mixed pool (pool.groups): its count, each endpoint's
// slots and KV cache, and its service times (an H100-like group beside an L4-like one).
struct EndpointGroup {
  int endpoints = 1;
  int slots = 16;
  std::int64_t kvCapacityTokens = 32768;
  PoolTiming timing;
};

struct PoolSpec {
  // The single-group form: `endpoints` identical servers with the fields below. With `groups`
  // (the mixed form), `endpoints` is the groups' total and slots, kvCapacityTokens and the service
  // times are the first group's.
  int endpoints = 4;
  int slots = 16;
  double prefillBaseMs = 5.0;
  double prefillPerTokenMs = 0.05;
  double tpotBaseMs = 5.0;
  double tpotPerRunningMs = 0.25;
  std::int64_t kvCapacityTokens = 32768;
  double scrapeIntervalMs = 50.0;
  // In-flight eviction: from the controller's evict callback to the victim's slot being free
  // (the host aborts the request on its server, which then frees the slot and its KV); the
  // host confirms with FlowController::release at that moment. >= 0.
  double revocationLatencyMs = 50.0;
  ServiceModel service = ServiceModel::kTokens;
  double meanServiceMs = 1000.0;  // exponential service only
  // Gateway replicas: each has its own FlowController and its own in-flight counts, arrivals are
  // spread over them round-robin, all read the same scraped telemetry.
  int gatewayReplicas = 1;
  // Replica sync (holdback/detector/replica_sync.hpp): with the dispatch ledger and more than one
  // replica, every this many ms each replica publishes its pending dispatches to a shared store
  // and reads the others' sum, which replaces the 1/R share in its ledger. 0 (the default): off,
  // each replica counts its own pending work R times.
  double replicaSyncIntervalMs = 0.0;
  // The replica feed (holdback/detector/replica_sync.hpp, "The replica feed"): with replica sync,
  // each replica's dispatches, completions and arrivals reach the other replicas
  // replicaFeedDelayMs later, and each replica scrapes on its own timer (a phase drawn per seed)
  // rather than all at one instant. Off by default.
  bool replicaFeed = false;
  double replicaFeedDelayMs = 0.5;  // >= 0
  // With the replica feed: a replica leaves a dispatch to another whose head of the same band
  // waited longer (ReplicaShare::headTolerance, 100 ms), as the gateway does. false: each
  // replica dispatches whatever it sees room for (the comparison in docs/results/replicas.md).
  bool replicaOldestFirst = true;
  // share (the default): the above. reserve: every dispatch books its footprint (one slot, its
  // KV tokens) on its endpoint in a table the replicas share (detector/reservation.hpp) and
  // starts only once booked; a refused request is parked at its replica until a booking is
  // released. Runs on replica sync (kGatewayReplicaSyncMs unless set) and the feed, as the
  // gateway does (applyReplicaModeDefaults).
  ReplicaMode replicaMode = ReplicaMode::kShare;
  // reserve: one round trip to the table per reservation (the request starts one round trip
  // after its dispatch); a release reaches the table half of it after the completion, and the
  // table's notice of it the parked replicas half of it later. >= 0; a same-host Redis.
  double replicaReserveRttMs = 0.2;
  // reserve: a replica with parked requests retries the head of its list this often when no
  // release notice came first. > 0.
  double replicaReserveRetryMs = 5.0;
  // Utilization detector only: every replica feeds its own DispatchLedger (its own dispatches and
  // completions, every scrape installed with its sample time) and fills its Endpoint view through
  // it before every detector call. On by default: the simulated gateway is a host that feeds the
  // ledger, and the library's correction is on wherever the host feeds it (docs/simulation.md,
  // "The dispatch ledger and the slot term"). Off: the scraped figures as they are plus an
  // InFlightTracker's counts (the behaviour without the ledger). The concurrency detector ignores
  // it.
  bool dispatchLedger = true;
  // The ledger's per-scrape dispatch budget (DispatchLedgerOptions::dispatchBudget, with
  // budgetQueueDepth = the detector's queueDepthThreshold, 5).
  bool ledgerBudget = false;
  // DispatchLedgerOptions::creditCompletions: completions of requests the last scrape showed
  // lower its figures at once (off by default, as in the library).
  bool ledgerCreditCompletions = false;
  // The servers' own scheduling (EngineScheduling above); token service only for
  // priority-preempt. An arm's Arm::engineScheduling replaces it for that arm.
  EngineScheduling engineScheduling = EngineScheduling::kFcfs;
  // Fault: this fraction of completions is never reported to the ledger, in [0, 1]; drawn from
  // its own seeded stream, so runs stay deterministic. Ledger only.
  double lostCompletions = 0.0;
  // Utilization detector: the slot term (maxRunningRequests = slots). On by default: the
  // simulated pool's slots are its servers' --max-num-seqs, configuration a deployment knows
  // (the library's detector leaves it off by default for parity with the reference, which has no
  // slot figure). Off: the KV-dominated roofline of the reference.
  bool slotTerm = true;
  // Concurrency detector: what it counts. requests (the default): in-flight requests against
  // `slots`; tokens: in-flight tokens (input + output of each request) against kvCapacityTokens;
  // hybrid: per endpoint the larger of the two fractions.
  CountedResource concurrencyMode = CountedResource::kRequests;
  // Utilization detector: how endpoint scores become the pool's saturation (the detector's
  // `aggregation`): "capacity" (the default; weighted by each endpoint's slots, the same as the
  // mean on a pool of one size), "mean", "max" (worst endpoint) or "weighted".
  std::string aggregation = "capacity";
  // The mixed form: the groups in order (endpoint indices follow them). Empty: the single-group
  // form.
  std::vector<EndpointGroup> groups;

  // The pool as groups: `groups`, or the single-group form as one group.
  [[nodiscard]] std::vector<EndpointGroup> endpointGroups() const;
  // One entry per endpoint (group order): its group's settings, with endpoints = 1.
  [[nodiscard]] std::vector<EndpointGroup> endpointSpecs() const;
  // The pool's slots and KV tokens over every endpoint.
  [[nodiscard]] std::int64_t totalSlots() const;
  [[nodiscard]] std::int64_t totalKvCapacityTokens() const;

  // The service times of the pool model (src/sim/pool_timing.hpp), shared with the fake model
  // server.
  [[nodiscard]] PoolTiming timing() const noexcept {
    return {.prefillBaseMs = prefillBaseMs,
            .prefillPerTokenMs = prefillPerTokenMs,
            .tpotBaseMs = tpotBaseMs,
            .tpotPerRunningMs = tpotPerRunningMs};
  }
};

struct Scenario {
  std::string name = "default";  // catalog name, or the scenario file's path
  PoolSpec pool;
  std::vector<TrafficClass> classes;
  double durationSeconds = 60.0;
  double drainSeconds = 30.0;
  std::uint64_t seed = 1;
  DetectorKind detector = DetectorKind::kUtilization;
  // Holdback arms: minCeiling of stepwise/linear/sigmoid; sigmoid steepness (rank domain).
  double minCeiling = 0.5;
  double sigmoidSteepness = 10.0;
  // Arms with reserve restoration (reservation+evict): EvictionOptions::restoreReserve's
  // burstMemory in seconds; 0 = off.
  double restoreBurstMemorySeconds = 0.0;
  // Arms with reserve restoration: its budgets (ReserveRestoreOptions::evictionBudget,
  // evictionBurst, wasteBudget, wasteBurst in seconds); < 0 = the arm's own (Arm::evictionBudget
  // and the others).
  double restoreEvictionBudget = -1.0;
  double restoreEvictionBurst = -1.0;
  double restoreWasteBudget = -1.0;
  double restoreWasteBurstSeconds = -1.0;
  // Arms with reserve restoration: upstream's head-of-line trigger too (1), not (0), or the
  // arm's own (-1).
  int restoreRevokeOnBlock = -1;
  // Arms with reserve restoration: ReserveRestoreOptions::burstSignificance (0 = restore at any
  // time), or the arm's own (< 0).
  double restoreBurstSignificance = -1.0;
};

// The built-in scenario (the batch-gateway story): interactive p100 on/off 24 req/s for 30 s then
// 1 req/s for 30 s, 512 in / 128 out, TTL 30 s; standard p50 Poisson 3 req/s, 1024 in / 256 out;
// batch p-1 closed-loop backlog of 400 (ramped in over 10 s), input uniform [256, 2048], output
// uniform [64, 512].
[[nodiscard]] Scenario defaultScenario();

// The built-in catalog (docs/simulation.md says what each is for; the trace scenarios are in
// docs/guide/traces.md):
//   default           defaultScenario()
//   burst-after-idle  the batch backlog fills the pool first; interactive idles at 1 req/s for
//                     30 s, then bursts at 24 req/s for 30 s into the full pool; 3 cycles (180 s)
//   short-bursts      interactive 5 s on (24 req/s) / 25 s off (1 req/s), off first, for 300 s
//   kv-bound          burst-after-idle with long batch contexts (input uniform [1024, 4096]): the
//                     servers' KV cache fills before their slots do
//   replay-small      a small, slow pool holdback-replay plays in about a minute
//   azure-code        the Azure 2023 code trace as the interactive class, a batch backlog behind
//   azure-conv        the Azure 2023 conversation trace, the same way
struct CatalogEntry {
  std::string_view name;
  std::string_view purpose;
};
[[nodiscard]] std::vector<CatalogEntry> scenarioCatalog();
// The catalog scenario `name`; false when there is none. A trace scenario whose trace file
// cannot be read is false too, with the reason in `error` (the 3-argument form).
[[nodiscard]] bool findScenario(std::string_view name, Scenario& out);
[[nodiscard]] bool findScenario(std::string_view name, Scenario& out, std::string& error);

// Where the built-in trace scenarios find their traces: $HOLDBACK_DATA_DIR/traces when that is
// set, else <the running binary's directory>/../share/holdback/traces when it exists (an installed
// holdback), else the source tree's data/traces (a build tree).
[[nodiscard]] std::string builtinTraceDirectory();

// Reads a scenario document (JSON or YAML, see docs/simulation.md for the keys). Every problem is
// reported with its JSON path; absent keys keep defaultScenario()'s pool and settings, and
// "classes", when given, replaces the default classes. A relative trace file is read relative to
// `baseDirectory` (the scenario file's directory; empty: the working directory).
[[nodiscard]] Result<Scenario> parseScenario(const config::Json& document,
                                             const std::string& baseDirectory = {});

// Reads /pool/groups (the mixed form) into `pool` when present: each group's endpoints (required,
// >= 1), slots, kvCapacityTokens and service times; errors name the path, the value and what is
// allowed. A pool section with both forms, an empty list or a group without endpoints is an error.
// Called by parseScenario (src/sim/pool_groups.cpp).
void readPoolGroups(config::ParamReader& pool, PoolSpec& out);
// The built-in "mixed-pool": burst-after-idle on 2 H100-like endpoints (64 slots, 128k-token KV,
// fast) beside 4 L4-like ones (12 slots, 16k-token KV, slow), traffic scaled to the pool.
[[nodiscard]] Scenario mixedPoolScenario();
// "4 endpoints x 16 slots"; a mixed pool: "2 endpoints x 64 slots + 4 endpoints x 12 slots".
[[nodiscard]] std::string describePool(const PoolSpec& pool);

// The most requests one run is allowed to create. The simulator keeps every request of a run
// (about 300 bytes each, for the report and requests.csv), so a scenario within every key's range
// can still ask for more than a machine holds: 30 req/s for 1e6 s is 3e7 requests, 9 GB.
inline constexpr double kMaxRequestsPerRun = 2e6;

// An upper estimate of the requests one run of `s` creates: per class, the open-loop arrivals at
// the higher of its two rates over durationSeconds, or for a backlog class its backlog plus the
// completions the whole pool could make in durationSeconds + drainSeconds at that class's
// shortest service time (each completion brings the next request).
[[nodiscard]] double estimatedRequestsPerRun(const Scenario& s);

// An error naming the estimate, the limit and the largest class when estimatedRequestsPerRun(s)
// exceeds kMaxRequestsPerRun; empty when the scenario fits. parseScenario reports it at
// /durationSeconds; `holdback simulate` checks it again after --duration.
[[nodiscard]] std::string scenarioSizeError(const Scenario& s);

// Reserve mode runs on replica sync and the feed, as the gateway does: a sync interval of
// kGatewayReplicaSyncMs where none is set, and the feed on. No-op in share mode.
void applyReplicaModeDefaults(PoolSpec& pool) noexcept;

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
