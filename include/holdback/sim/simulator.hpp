// A deterministic discrete-event simulation of an LLM gateway in front of a pool of model servers,
// driving the real library: the real FlowController, usage limit policies and saturation detectors.
// Only the pool, the clock and the traffic are simulated. `holdback simulate` is its front end.
//
// The algorithm
//   Time is an integer count of nanoseconds from 0; events at the same time run in the order they
//   were scheduled, so a run is a pure function of (scenario, arm, seed).
//
//   Pool: `endpoints` servers with `slots` batch slots each and a server-side FCFS queue. A request
//   admitted to a slot (when one is free and its input fits the KV cache) spends
//   prefill = prefillBase + input x prefillPerToken, after which its first token exists (TTFT);
//   it then decodes its remaining output tokens, one per server step, a step taking
//   TPOT = tpotBase + tpotPerRunning x running (continuous batching: the batch slows down as it
//   grows). KV fraction = tokens held (input + generated) / kvCapacityTokens. With
//   service = exponential, a request holds its slot for an exponential time of mean
//   meanService instead and its first token is at admission (the M/M/c check).
//
//   Gateway: telemetry (waiting queue, running, KV fraction) is copied into the Endpoint snapshot
//   only every scrapeInterval; between scrapes the detector sees stale figures (the thundering
//   herd). The gateway's own in-flight counts (inFlightRequests / inFlightTokens) are always
//   current (the concurrency detector reads them). A dispatched request is routed to the least
//   loaded endpoint (scraped waiting + running, then the gateway's in-flight count, then index)
//   among those the detector's filter keeps.
//
//   Flow control, as the reference's processor (upstream-reference.md §3): every arrival is
//   enqueued and followed by one dispatchCycle; a 1 ms ticker runs one dispatchCycle; expire()
//   runs every second. The arm "none" routes every arrival at once (no FlowController).
//
//   Traffic: classes with a priority, an arrival process (Poisson; on/off with one rate in the
//   on phase and another in the off phase, starting "on" at t = 0; closed-loop backlog keeping a
//   fixed number of requests outstanding, each ending replaced at once), input/output length
//   distributions and a TTL. Every class draws from its own random stream, so arms see the same
//   open-loop arrivals.
//
//   Measurement: requests arriving in [0, duration) are measured; arrivals stop at `duration`
//   and the run continues up to `drain` more seconds so that queued requests can finish. Windows:
//   "burst" and "idle" are the on and off phases of the first on/off class ("all" otherwise).
//   Throughput counts completions inside [0, duration) per window.
//
// Thread safety: thread-compatible (a run uses only its own state).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

enum class ArrivalProcess { kPoisson, kOnOff, kBacklog };

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::kPoisson;
  double rate = 1.0;  // requests/s (Poisson), or during the on phase (on/off)
  double offRate = 0.0;
  double onSeconds = 30.0;
  double offSeconds = 30.0;
  std::int64_t backlog = 0;  // outstanding requests (closed loop)
  double rampSeconds = 0.0;  // the initial backlog arrives evenly spread over [0, ramp)
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
};

enum class ServiceModel { kTokens, kExponential };
enum class DetectorKind { kUtilization, kConcurrency };
// "utilization", "concurrency".
[[nodiscard]] std::string_view toString(DetectorKind kind) noexcept;

struct PoolSpec {
  int endpoints = 4;
  int slots = 16;
  double prefillBaseMs = 5.0;
  double prefillPerTokenMs = 0.05;
  double tpotBaseMs = 5.0;
  double tpotPerRunningMs = 0.25;
  std::int64_t kvCapacityTokens = 32768;
  double scrapeIntervalMs = 50.0;
  ServiceModel service = ServiceModel::kTokens;
  double meanServiceMs = 1000.0;  // exponential service only
};

struct Scenario {
  PoolSpec pool;
  std::vector<TrafficClass> classes;
  double durationSeconds = 60.0;
  double drainSeconds = 30.0;
  std::uint64_t seed = 1;
  DetectorKind detector = DetectorKind::kUtilization;
  // Holdback arms: minCeiling of stepwise/linear/sigmoid; sigmoid steepness (rank domain).
  double minCeiling = 0.5;
  double sigmoidSteepness = 10.0;
};

// The built-in scenario (the batch-gateway story): interactive p100 on/off 24 req/s for 30 s then
// 1 req/s for 30 s, 512 in / 128 out, TTL 30 s; standard p50 Poisson 3 req/s, 1024 in / 256 out;
// batch p-1 closed-loop backlog of 400 (ramped in over 10 s), input uniform [256, 2048], output
// uniform [64, 512].
[[nodiscard]] Scenario defaultScenario();

// Reads a scenario document (JSON or YAML, see docs/simulation.md for the keys). Every problem is
// reported with its JSON path; absent keys keep defaultScenario()'s pool and settings, and
// "classes", when given, replaces the default classes.
[[nodiscard]] Result<Scenario> parseScenario(const config::Json& document);

enum class ArmKind {
  kNone,
  kStatic,
  kStepwise,
  kLinear,
  kSigmoid,
  kStaticMap,
  kSoftReflective,
  kStepwiseActive,  // stepwise over the active priorities only (PriorityDomain::kActive, 1 s)
};

struct Arm {
  std::string name;
  ArmKind kind = ArmKind::kNone;
};

// none, static-1.0, stepwise, linear, sigmoid, static-map, soft-reflective, stepwise-active.
[[nodiscard]] std::vector<Arm> allArms();
// Looks an arm up by name; false when unknown.
[[nodiscard]] bool findArm(std::string_view name, Arm& out);

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

struct Percentiles {
  std::size_t count = 0;
  double p50 = kNoValue;
  double p95 = kNoValue;
  double p99 = kNoValue;
  double mean = kNoValue;
};

struct WindowStats {
  std::string window;  // "burst", "idle" or "all"
  std::size_t arrived = 0;
  Percentiles queueMs;       // gateway queueing delay (arrival -> dispatch)
  Percentiles serverWaitMs;  // server-side queue (dispatch -> slot)
  Percentiles ttftMs;        // arrival -> first token
  double completedPerSecond = 0.0;
  double outputTokensPerSecond = 0.0;
};

struct ClassResult {
  std::string name;
  Priority priority = 0;
  std::vector<WindowStats> windows;
  std::uint64_t arrived = 0;
  std::uint64_t completed = 0;
  std::uint64_t rejected = 0;
  std::uint64_t evicted = 0;
  std::uint64_t unfinished = 0;  // measured requests still queued or running when the run ended
};

// One request, for the per-request CSV (times in seconds; NaN when it never happened).
struct RequestRecord {
  std::uint32_t classIndex = 0;
  int endpoint = -1;
  std::int64_t inputTokens = 0;
  std::int64_t outputTokens = 0;
  double arrival = kNoValue;
  double dispatched = kNoValue;
  double admitted = kNoValue;
  double firstToken = kNoValue;
  double finished = kNoValue;
  std::string outcome;  // completed, rejected, evicted, unfinished
};

// One sample of the gateway every sampleInterval, for the per-interval CSV.
struct IntervalSample {
  double time = 0.0;
  double saturation = 0.0;               // the detector over the snapshot the gateway sees
  std::vector<double> ceilings;          // per class (its band's last ceiling; NaN if none)
  std::vector<std::size_t> queued;       // per class, in the gateway
  std::vector<std::size_t> serverQueue;  // per endpoint, true (not scraped)
  std::vector<std::size_t> running;      // per endpoint
};

struct ArmResult {
  Arm arm;
  DetectorKind detector = DetectorKind::kUtilization;
  std::vector<ClassResult> classes;
  std::uint64_t cycles = 0;
  std::uint64_t cyclesWithWork = 0;     // cycles that found queued work
  std::uint64_t gatedCycles = 0;        // ... and stopped at a gated band (head-of-line blocked)
  double meanSaturation = 0.0;          // over the sampled intervals
  std::vector<RequestRecord> requests;  // when RunOptions::collectSeries
  std::vector<IntervalSample> samples;  // when RunOptions::collectSeries
};

struct RunOptions {
  bool collectSeries = false;
  double sampleIntervalMs = 100.0;
};

// Runs one arm. Arms run with the same seed see the same open-loop traffic.
[[nodiscard]] ArmResult runArm(const Scenario& scenario, const Arm& arm,
                               const RunOptions& options = {});

// The table `holdback simulate` prints (fixed formatting: same results, same text).
[[nodiscard]] std::string formatTable(const Scenario& scenario, const std::vector<ArmResult>& arms);

// CSV text: one row per request (arm,class,...) and one row per interval sample.
[[nodiscard]] std::string requestsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms);
[[nodiscard]] std::string intervalsCsv(const Scenario& scenario,
                                       const std::vector<ArmResult>& arms);
// The empirical TTFT distribution of each class and arm (requests measured and served), sorted:
// arm,class,ttft_ms,fraction.
[[nodiscard]] std::string ttftCdfCsv(const Scenario& scenario, const std::vector<ArmResult>& arms);
// A summary row per arm, class and window (the table as CSV).
[[nodiscard]] std::string summaryCsv(const std::vector<ArmResult>& arms);

// A gnuplot script that, run in the directory holding intervals.csv and ttft-cdf.csv, renders
// saturation-<detector>.png (saturation over time per arm), bands-<arm>.png (each band's ceiling
// and gateway queue depth over time) and ttft-cdf-<detector>-<class>.png (TTFT CDF per arm).
[[nodiscard]] std::string gnuplotScript(const Scenario& scenario,
                                        const std::vector<ArmResult>& arms);

// Erlang C: the mean wait in queue of an M/M/c queue with arrival rate `lambda`, service rate
// `mu` per server and `c` servers; infinity when lambda >= c * mu.
[[nodiscard]] double erlangCMeanWait(double lambda, double mu, int c);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
