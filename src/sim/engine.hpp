// Private to src/sim: the engine's state and the pieces the engine, the pool model and the
// measurement share. Not installed.
//
// Files: engine.cpp (event loop, arrivals, gateway and routing), pool_model.cpp (the servers),
// measure.cpp (samples, windows, percentiles), arms.cpp, scenario.cpp, report.cpp.
#pragma once

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "holdback/core/output_estimator.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/endpoint_picker.hpp"
#include "holdback/detector/in_flight_tracker.hpp"
#include "holdback/detector/replica_sync.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "sim/replica_reserve.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim::detail {

using Nanos = std::int64_t;
constexpr Nanos kSecond = 1'000'000'000;

inline Nanos fromSeconds(double s) {
  return static_cast<Nanos>(std::llround(s * 1e9));
}
inline Nanos fromMs(double ms) {
  return static_cast<Nanos>(std::llround(ms * 1e6));
}
inline double toSeconds(Nanos t) {
  return static_cast<double>(t) / 1e9;
}
inline TimePoint at(Nanos t) {
  return TimePoint{} + std::chrono::nanoseconds(t);
}

// splitmix64-seeded xorshift-free generator: std::mt19937_64 is specified bit-exactly, and the
// variates are computed here (std:: distributions are implementation-defined).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }

 private:
  std::uint64_t state_;
};

inline std::int64_t sampleLength(const LengthSpec& spec, Random& rng) {
  double v = spec.mean;
  switch (spec.distribution) {
    case LengthDistribution::kFixed:
      break;
    case LengthDistribution::kUniform:
      v = static_cast<double>(spec.min) +
          std::floor(rng.uniform() * static_cast<double>(spec.max - spec.min + 1));
      break;
    case LengthDistribution::kExponential:
      v = std::ceil(rng.exponential(spec.mean));
      break;
  }
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(v));
}

enum class EventType : std::uint8_t {
  kArrival,
  kTick,
  kScrape,
  kStep,
  kComplete,
  kExpire,
  kSample,
  kRevoke,  // the host's abort reaches the victim's server (pool.revocationLatencyMs after evict)
  kReplicaSync,  // every replica publishes its pending work and reads the others' (replica sync)
  kFeed,    // a replica's dispatch, completion or arrival reaches the others (index: feedEvents_)
  kReserve  // reserve mode: a call, reply, release, notice or retry (index: reserveEvents_)
};

struct Event {
  Nanos time = 0;
  std::uint64_t seq = 0;
  EventType type = EventType::kTick;
  std::size_t index = 0;  // class (arrival), endpoint (step), request (complete)
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

// kEvicted: the controller evicted the request from its queue (TTL); kRevoked: in-flight
// eviction aborted it on its server (its client retries it as a new request).
enum class State : std::uint8_t {
  kQueued,
  kServerQueue,
  kRunning,
  kDone,
  kRejected,
  kEvicted,
  kRevoked,
  kTooLarge  // input + output exceed every endpoint's KV capacity: refused, never queued
};

struct Request {
  std::uint32_t cls = 0;
  int endpoint = -1;
  std::int64_t input = 0;
  std::int64_t output = 0;
  std::int64_t generated = 0;
  Nanos arrival = 0;
  Nanos dispatched = -1;
  Nanos admitted = -1;
  Nanos firstToken = -1;
  Nanos finished = -1;
  State state = State::kQueued;
  std::uint32_t gateway = 0;  // the replica the request arrived at
  RequestId leaseId = 0;      // the controller's id once dispatched (released at completion)
  bool revoking = false;      // evict was called; the abort reaches the server after the latency
  std::int64_t retryOf = -1;  // the revoked request this one retries
  bool parked = false;        // reserve mode: dispatched, waiting for a booking (no endpoint)
  // The server's own scheduling (pool.engineScheduling): when it reached its server (its place
  // in a priority queue), when its current prefill ends (its first token, or after a preemption
  // the end of the recompute; it decodes from then on), and its preemptions and the tokens they
  // made it prefill again.
  Nanos serverArrival = -1;
  Nanos ready = -1;
  std::uint32_t preemptions = 0;
  std::int64_t recomputedTokens = 0;
  bool preempted = false;  // preempted since it last started: its next start recomputes
};

struct Server {
  EndpointGroup spec;  // its slots, KV capacity and service times (its group's)
  std::deque<std::size_t> queue;
  std::vector<std::size_t> running;
  std::int64_t kvTokens = 0;
  bool stepScheduled = false;
};

class SimEndpoints final : public EndpointSource {
 public:
  explicit SimEndpoints(std::size_t n) : pool_(n) {
    for (std::size_t i = 0; i < n; ++i) pool_[i].name = "endpoint-" + std::to_string(i);
  }
  std::span<const Endpoint> endpoints(TimePoint) noexcept override { return pool_; }
  std::vector<Endpoint>& pool() { return pool_; }

 private:
  std::vector<Endpoint> pool_;
};

// One gateway replica: its own FlowController, its own in-flight counts (in its Endpoint view,
// whose scraped fields every scrape overwrites with the same telemetry) and its own picker.
struct Gateway {
  std::shared_ptr<SimEndpoints> source;
  std::unique_ptr<FlowController> fc;  // null for an arm without flow control
  EndpointPicker picker;
  std::unique_ptr<InFlightTracker> inFlight;  // the replica's own in-flight counts
  // pool.dispatchLedger (utilization detector): the replica's own ledger, which then replaces
  // inFlight, and the ids of the endpoints in it (ids[i] is pool()[i]).
  std::unique_ptr<DispatchLedger> ledger;
  std::vector<EndpointId> ids;
  std::vector<std::int64_t> above;  // priority routing: the picker's counts (Arm::priorityRouting)
  // Arms with eviction: the request behind each lease the controller may revoke.
  std::unordered_map<RequestId, std::size_t> leases;
  // The output tokens of each priority learned from the completions of classes that declare no
  // output (TrafficClass::declaresOutput false).
  std::unique_ptr<OutputEstimator> outputs;
  // Reserve mode (pool.replicaMode): the replica's parked requests, call and table figures.
  std::unique_ptr<ReserveReplica> reserve;
  // Refreshes the replica's Endpoint view from its ledger (no-op without one); in reserve mode
  // its parked requests on top (ReserveReplica::overlay).
  void fill() {
    if (!ledger) return;
    ledger->fill(source->pool(), ids);
    if (reserve) reserve->overlay(source->pool());
  }
};

// The store the simulated replicas share (replica sync): every replica's last publication, per
// endpoint. Instant and never down: the simulation models the sync interval only.
struct SimReplicaStore {
  std::vector<std::vector<InFlightLoad>> published;  // [replica][endpoint]
  std::vector<ReplicaRestoreFigures> figures;        // [replica]
};

class SimReplicaSync final : public ReplicaSync {
 public:
  SimReplicaSync(SimReplicaStore& store, std::size_t self) : store_(store), self_(self) {}
  std::int64_t exchange(std::span<const InFlightLoad> mine, std::span<InFlightLoad> othersSum,
                        const ReplicaRestoreFigures& mineFigures,
                        ReplicaRestoreFigures& othersFigures) noexcept override {
    std::copy(mine.begin(), mine.end(), store_.published[self_].begin());
    store_.figures[self_] = mineFigures;
    for (std::size_t r = 0; r < store_.published.size(); ++r) {
      if (r == self_) continue;
      for (std::size_t k = 0; k < othersSum.size(); ++k) {
        othersSum[k].requests += store_.published[r][k].requests;
        othersSum[k].tokens += store_.published[r][k].tokens;
      }
      othersFigures += store_.figures[r];
    }
    return static_cast<std::int64_t>(store_.published.size()) - 1;
  }
  // Replica g is rank g (the free room split, dispatch_ledger.hpp).
  [[nodiscard]] std::int64_t rank() const noexcept override {
    return static_cast<std::int64_t>(self_);
  }

 private:
  SimReplicaStore& store_;
  std::size_t self_;
};

// One replica's event on the replica feed (pool.replicaFeed).
struct FeedEvent {
  enum class Kind : std::uint8_t { kDispatch, kCompletion, kArrival };
  Kind kind = Kind::kDispatch;
  std::uint32_t gateway = 0;   // the replica it happened on
  std::uint32_t endpoint = 0;  // dispatch, completion
  Priority priority = 0;       // arrival
  std::int64_t tokens = 0;     // dispatch, completion: the ledger's tokens; arrival: kvTokens
};

inline constexpr double kOnsetSeconds = 2.0;  // the onset window: the first 2 s of each burst

// Position of t within an on/off class's period, counted from the start of an on phase (a class
// that starts off is shifted by one on phase).
Nanos phasePosition(const ArrivalSpec& a, Nanos t);

// The next arrival after `from` of a Poisson or on/off class, drawn from `rng`; nullopt when none
// comes before `end`.
std::optional<Nanos> nextArrival(const ArrivalSpec& a, Random& rng, Nanos from, Nanos end);

// One foreseen arrival of a top-priority class (the oracle arm): its time, sizes, and the time it
// is expected to hold a slot (0: larger than every endpoint's KV, it never runs).
struct OracleArrival {
  Nanos time = 0;
  std::int64_t input = 0;
  std::int64_t output = 0;
  Nanos service = 0;
};

// The expected end of a request in the oracle's forecast: at `time` it frees a slot and `kv` tokens
// on `endpoint`.
struct OracleEnd {
  Nanos time = 0;
  std::size_t endpoint = 0;
  std::int64_t kv = 0;
  bool operator>(const OracleEnd& o) const { return time > o.time; }
};

// The ledger options that count requests in flight by the scenario's class priorities, for an arm
// with priority routing (Arm::priorityRouting); the defaults otherwise.
[[nodiscard]] DispatchLedgerOptions priorityLevelsOf(const Scenario& s, const Arm& arm);

class Simulation {
 public:
  Simulation(const Scenario& s, const Arm& arm, const RunOptions& options);
  ArmResult run();
  // measureRecords (simulator.hpp): `records` measured as a finished run's requests.
  ArmResult collectRecords(const std::vector<RequestRecord>& records);

 private:
  // engine.cpp
  void schedule(Nanos t, EventType type, std::size_t index);
  [[nodiscard]] const ArrivalSpec* windowClass() const;  // the first on/off class
  [[nodiscard]] bool burstAt(Nanos t) const;
  [[nodiscard]] bool onsetAt(Nanos t) const;
  [[nodiscard]] bool hasWindows() const;
  void scheduleNextArrival(std::size_t c, Nanos from);
  void handle(const Event& e);
  void arrive(std::size_t c);
  void cycle(std::size_t gateway);
  void onOutcome(std::size_t gateway, Completion&& c);
  void replace(std::size_t id);
  void route(std::size_t id);
  void sendTo(std::size_t id, std::size_t endpoint);  // to its server, counted in the view
  void submit(Request r);
  // The retry of revoked request `id` (its class and sizes), arriving at `now`.
  [[nodiscard]] static Request retryOf(const Request& revoked, std::size_t id, Nanos now);
  void onRevocation(std::size_t gateway, const Revocation& rev);

  // pool_model.cpp
  [[nodiscard]] Nanos tpot(const Server& sv) const;
  void admit(std::size_t e);
  void step(std::size_t e);
  void finish(std::size_t id);
  void complete(std::size_t id);
  void abort(std::size_t id);
  void releaseSlot(std::size_t id, bool running);
  // engine_scheduling.cpp: the server's queue order and priority preemption.
  void enqueueOnServer(std::size_t e, std::size_t id);  // FIFO, or by priority
  // Priority preemption: while the head of e's queue does not start and a running request of a
  // lower priority is there, preempts it (the lowest priority, most recently arrived first).
  void preemptFor(std::size_t e);
  void preempt(std::size_t e, std::size_t id);
  // A request's start on its server: fresh, or a preempted one recomputing its tokens.
  void start(std::size_t e, std::size_t id);
  [[nodiscard]] std::int64_t startTokens(const Request& r) const;  // KV it needs to start
  [[nodiscard]] Priority priorityOf(const Request& r) const { return s_.classes[r.cls].priority; }
  // Arm::priorityRouting: each endpoint's requests in flight of request id's priority or above,
  // from the replica's ledger (EndpointPicker rule 4a); empty without priority routing.
  [[nodiscard]] std::span<const std::int64_t> priorityCounts(std::size_t id);
  // Every replica's scrape (which: 0), or with the replica feed replica which - 1's alone.
  void scrape(std::size_t which = 0);
  // The replica feed: `e` reaches the other replicas pool.replicaFeedDelayMs from now.
  void feed(const FeedEvent& e);
  void deliver(const FeedEvent& e);

  // replica_reserve.cpp: reserve mode (pool.replicaMode; docs/design/replicas.md)
  void reserveSetup();
  void reserveSchedule(Nanos t, const ReserveEvent& e);
  void reserveHandle(ReserveEvent e);        // a copy: handling it schedules more
  void reserveRoute(std::size_t id);         // the controller dispatched it: park and call
  void reservePump(std::size_t gateway);     // a call for the head of the parked list
  void reserveRelease(std::size_t id);       // it left its server: its booking goes
  void reserveCancel(std::size_t id);        // a parked request revoked: it never started
  void reserveSync(std::size_t gateway);     // renew the leases, read the bookings
  void reserveScraped(std::size_t gateway);  // the replica's scrape: the room it sends
  [[nodiscard]] TimePoint reserveLease() const;
  // The free slots a booking of band `band` by replica `gateway` leaves over the pool.
  [[nodiscard]] std::int64_t reserveBandKeep(std::size_t gateway, Priority band) const;

  // oracle.cpp: the simulator-only arm `oracle` (Arm::oracle; docs/simulation.md)
  void oracleSetup();  // the top classes' arrivals foreseen, before the run draws any
  void oracleSubmit(std::size_t id);
  void oracleCycle();
  [[nodiscard]] std::optional<std::size_t> oracleEndpointFor(const Request& r) const;
  [[nodiscard]] std::size_t oracleSoonest();
  [[nodiscard]] bool oracleAdmits(const Request& r, std::size_t e);
  [[nodiscard]] Nanos oracleService(std::int64_t input, std::int64_t output,
                                    const EndpointGroup& g) const;
  [[nodiscard]] Nanos oracleRemaining(const Request& r, const Server& sv) const;

  // measure.cpp
  void sample();
  ArmResult collect();
  [[nodiscard]] std::vector<WindowStats> minuteWindows(std::size_t c) const;

  const Scenario& s_;
  Arm arm_;
  RunOptions options_;
  EngineScheduling engine_ = EngineScheduling::kFcfs;  // engineSchedulingOf(scenario, arm)
  std::uint64_t preemptions_ = 0;
  std::uint64_t recomputedTokens_ = 0;
  std::vector<Server> servers_;
  std::int64_t largestKv_ = 0;  // the largest endpoint's KV cache (mixed pools)
  std::shared_ptr<const SaturationDetector> detector_;
  std::vector<Gateway> gateways_;  // pool.gatewayReplicas of them
  // Replica sync (pool.replicaSyncIntervalMs): the shared store and one syncer per replica.
  std::unique_ptr<SimReplicaStore> replicaStore_;
  std::vector<std::unique_ptr<ReplicaSync>> replicaSyncs_;
  std::vector<std::unique_ptr<ReplicaSyncer>> replicaSyncers_;
  // The replica feed (pool.replicaFeed, with replica sync): events in flight to the replicas.
  bool feedOn_ = false;
  std::vector<FeedEvent> feedEvents_;
  // Reserve mode: the table the replicas share, and events in flight.
  std::unique_ptr<ReservationTable> table_;
  std::vector<ReserveEvent> reserveEvents_;
  Priority reserveTop_ = 0;       // the top class's priority (its bookings may take the reserve)
  std::int64_t reserveKeep_ = 0;  // the policy's fixed reserve, rounded up (0: none)
  std::uint64_t arrivals_ = 0;
  std::vector<Random> rngs_;
  std::vector<TraceCursor> traces_;  // per class; trace classes only
  std::vector<Request> requests_;
  std::vector<InFlightHandle> inFlight_;  // per request, released when it completes
  Random lossRng_;                        // pool.lostCompletions draws
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  Nanos now_ = 0;
  Nanos end_;
  Nanos stop_;
  std::uint64_t cycles_ = 0;
  std::uint64_t cyclesWithWork_ = 0;
  std::uint64_t gatedCycles_ = 0;
  std::vector<double> saturations_;  // sampled in [0, end)
  std::vector<double> poolLoads_;    // sampled in [0, end)
  std::size_t maxServerQueue_ = 0;
  std::uint64_t dispatchesSinceScrape_ = 0;
  std::vector<double> dispatchesPerScrape_;
  std::vector<IntervalSample> samples_;
  std::uint64_t revocationsIssued_ = 0;
  std::uint64_t aborted_ = 0;
  std::uint64_t revocationsConfirmed_ = 0;
  std::uint64_t revocationsTimedOut_ = 0;
  bool truncated_ = false;  // stopped at options_.maxRequests
  std::uint64_t wastedTokens_ = 0;
  std::uint64_t repaidPrefillTokens_ = 0;
  // The oracle arm: the top classes' arrivals in time order, how many of them arrived, the other
  // classes' gateway queues (per class) in the order they are served, and the forecast's scratch.
  Priority oracleTop_ = 0;
  std::vector<OracleArrival> oracleFuture_;
  std::size_t oracleArrived_ = 0;
  std::vector<std::deque<std::size_t>> oracleQueues_;
  std::vector<std::size_t> oracleOrder_;
  std::vector<OracleEnd> oracleEnds_;                 // a min-heap by time
  std::vector<std::int64_t> oracleSlots_, oracleKv_;  // per endpoint: held slots and KV tokens
  std::vector<std::size_t> oracleQueued_;  // per endpoint: its queued requests started so far
  std::vector<Nanos> oracleStarts_;        // oracleSoonest's scratch
};

// The arm's policy's fixed reserve (its parameters' minReserve, in requests); 0 without one.
double policyMinReserve(const Scenario& s, const Arm& arm);

// Queued, on a server or running when the run ended.
bool unfinishedState(State s);

// Nearest-rank percentiles and the mean; sorts `v`.
Percentiles percentiles(std::vector<double>& v);

}  // namespace sim::detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
