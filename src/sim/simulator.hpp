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
//   herd). The gateway's own in-flight counts (inFlightRequests / inFlightTokens, kept by the
//   library's InFlightTracker: one handle per dispatched request) are always current (the
//   concurrency detector reads them). A dispatched request is routed by the
//   library's EndpointPicker (the gateway's rule: among the endpoints the detector's filter keeps,
//   fewest in flight, then smallest scraped waiting queue, ties round-robin).
//
//   Flow control, as the Go reference's processor
//   (pkg/epp/flowcontrol/controller/internal/processor.go of llm-d-router): every arrival is
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
//   "burst" and "idle" are the on and off phases of the first on/off class, "onset" the first 2 s
//   of each burst, "settled" the rest of each burst, "all" the whole of [0, duration). Throughput
//   counts completions inside [0, duration) per window.
//
//   Gateway replicas (pool.gatewayReplicas = R): R gateways, each with its own FlowController,
//   in-flight counts and picker; arrivals go round-robin over them; all read the same scrape.
//
// Thread safety: thread-compatible (a run uses only its own state).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/arms.hpp"
#include "sim/scenario.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

struct Percentiles {
  std::size_t count = 0;
  double p50 = kNoValue;
  double p95 = kNoValue;
  double p99 = kNoValue;
  double mean = kNoValue;
};

struct WindowStats {
  // "burst", "idle", "onset" (the first 2 s of each burst), "settled" (each burst after its first
  // 2 s) and "all" with an on/off class (the first one defines the windows), else "all" only.
  std::string window;
  std::size_t arrived = 0;
  Percentiles queueMs;                 // gateway queueing delay (arrival -> dispatch)
  Percentiles serverWaitMs;            // server-side queue (dispatch -> slot)
  Percentiles ttftMs;                  // arrival -> first token
  double completedPerSecond = 0.0;     // completions inside the window, per second of it
  double outputTokensPerSecond = 0.0;  // their output tokens, per second of the window
  // Outcomes of the requests that arrived in the window.
  std::size_t rejected = 0;
  std::size_t evicted = 0;
  std::size_t unfinished = 0;
  std::size_t tooLarge = 0;
  // Minute windows (ClassResult::minutes): the window's start and length in seconds.
  double startSeconds = 0.0;
  double seconds = 0.0;
};

struct ClassResult {
  std::string name;
  Priority priority = 0;
  std::vector<WindowStats> windows;
  // One window per 60 s of measured time, named "minute-0", "minute-1", ... (the last one may be
  // shorter): the windows of a trace, which has no on/off phases.
  std::vector<WindowStats> minutes;
  std::uint64_t arrived = 0;
  std::uint64_t completed = 0;
  std::uint64_t rejected = 0;
  std::uint64_t evicted = 0;
  std::uint64_t unfinished = 0;  // measured requests still queued or running when the run ended
  // Requests whose input + output exceed every endpoint's KV capacity: refused at once (by the
  // controller, HTTP 413, or by the server), never queued.
  std::uint64_t tooLarge = 0;
  // In-flight eviction: measured requests revoked on their server (each is retried by its
  // client as a new request), the output tokens they had generated (wasted), the prefill tokens
  // their retries pay again, and every output token the class's requests generated (completed,
  // revoked or unfinished; the denominator of the wasted share).
  std::uint64_t revoked = 0;
  std::uint64_t wastedTokens = 0;
  std::uint64_t repaidPrefillTokens = 0;
  std::uint64_t generatedTokens = 0;
  // Servers that preempt by priority (pool.engineScheduling priority-preempt): the times the
  // class's measured requests were preempted on their server (each goes back to the server's
  // queue; nothing is lost to the client) and the tokens they prefilled again when they restarted
  // (prompt + the output generated so far). Zero otherwise.
  std::uint64_t preemptions = 0;
  std::uint64_t recomputedTokens = 0;
};

// One request, for the per-request CSV (times in seconds; NaN when it never happened).
struct RequestRecord {
  std::uint32_t classIndex = 0;
  int endpoint = -1;
  std::uint32_t gateway = 0;  // the replica it arrived at (pool.gatewayReplicas)
  std::int64_t inputTokens = 0;
  std::int64_t outputTokens = 0;
  double arrival = kNoValue;
  double dispatched = kNoValue;
  double admitted = kNoValue;
  double firstToken = kNoValue;
  double finished = kNoValue;  // completed or revoked (the abort)
  std::string outcome;         // completed, rejected, evicted, revoked, too-large, unfinished
  // A retry of a revoked request: the index (in ArmResult::requests) of the request it repeats;
  // -1 for an original request.
  std::int64_t retryOf = -1;
  // Times it was preempted on its server (pool.engineScheduling priority-preempt).
  std::uint32_t preemptions = 0;
};

// One sample of the gateway every sampleInterval, for the per-interval CSV.
struct IntervalSample {
  double time = 0.0;
  double saturation = 0.0;               // the detector over the snapshot the gateway sees
  std::vector<double> ceilings;          // per class (its band's last ceiling; NaN if none)
  std::vector<std::size_t> queued;       // per class, in the gateway
  std::vector<std::size_t> serverQueue;  // per endpoint, true (not scraped)
  std::vector<std::size_t> running;      // per endpoint
  std::vector<std::int64_t> kvTokens;    // per endpoint: KV tokens held (running sequences)
};

struct ArmResult {
  Arm arm;
  DetectorKind detector = DetectorKind::kUtilization;
  std::vector<ClassResult> classes;
  std::uint64_t cycles = 0;
  std::uint64_t cyclesWithWork = 0;  // cycles that found queued work
  std::uint64_t gatedCycles = 0;     // ... and stopped at a gated band (head-of-line blocked)
  double meanSaturation = 0.0;       // over the sampled intervals in [0, duration)
  // Signal health: the p99 of the sampled saturation, the largest server-side queue any endpoint
  // reached, and the requests dispatched between two scrapes (the thundering herd as a number).
  double saturationP99 = kNoValue;
  // The true occupancy of the pool, (running + server-queued) / (endpoints x slots), sampled as
  // the saturation is: what one gateway with fresh counts would see. Differs from the saturation
  // with a stale signal or with several replicas.
  double poolLoadMean = 0.0;
  double poolLoadP99 = kNoValue;
  std::size_t maxServerQueue = 0;
  Percentiles dispatchesPerScrape;
  double dispatchesPerScrapeMax = 0.0;
  // In-flight eviction (arms with Arm::eviction): revocations the controller issued, requests
  // actually aborted on a server (a victim that ends on its own within the revocation latency is
  // not), the output tokens they had generated (wasted) and the prefill tokens paid again on
  // retry (the input of every aborted request that had been admitted to a slot).
  std::uint64_t revocationsIssued = 0;
  std::uint64_t inFlightEvictions = 0;
  // How the controller saw them end (EvictionStats, summed over the replicas at the end of the
  // run): confirmed by the host's release, or timed out.
  std::uint64_t revocationsConfirmed = 0;
  std::uint64_t revocationsTimedOut = 0;
  std::uint64_t wastedTokens = 0;
  std::uint64_t repaidPrefillTokens = 0;
  // Priority preemption on the servers (ClassResult::preemptions), over every request of the run.
  std::uint64_t preemptions = 0;
  std::uint64_t recomputedTokens = 0;
  std::vector<RequestRecord> requests;  // when RunOptions::collectSeries
  std::vector<IntervalSample> samples;  // when RunOptions::collectSeries
  // The run created RunOptions::maxRequests requests and stopped there: its figures cover only
  // the simulated time up to that moment.
  bool truncated = false;
};

struct RunOptions {
  bool collectSeries = false;
  double sampleIntervalMs = 100.0;
  // >= 0: only this class sends traffic (the others send nothing; every class keeps its own
  // random stream, so the class's arrivals are the same as in the full run): the unloaded
  // baseline.
  int onlyClass = -1;
  // The most requests the run creates (every one is kept, ~300 bytes); reaching it stops the
  // run and sets ArmResult::truncated. parseScenario refuses scenarios whose estimate exceeds
  // kMaxRequestsPerRun, so this is the backstop for what the estimate does not count.
  double maxRequests = kMaxRequestsPerRun;
};

// Runs one arm. Arms run with the same seed see the same open-loop traffic.
[[nodiscard]] ArmResult runArm(const Scenario& scenario, const Arm& arm,
                               const RunOptions& options = {});

// A run made outside the simulator (holdback-replay plays the scenario on real processes),
// measured as runArm measures its own: per class and window the same percentiles, goodput and
// outcomes. Each record needs classIndex, the lengths, arrival, and when they happened dispatched,
// firstToken and finished (seconds from the run's start; NaN when not), and outcome (completed,
// rejected, evicted, revoked or unfinished). The gateway's internal figures (cycles, saturation,
// pool load, scrapes) stay zero; requests and samples are not kept.
[[nodiscard]] ArmResult measureRecords(const Scenario& scenario, const Arm& arm,
                                       const std::vector<RequestRecord>& records);

inline constexpr double kMinuteSeconds = 60.0;
// The index in c.minutes of the minute with the highest TTFT p99 (the first on ties); nullopt when
// no minute has a TTFT.
[[nodiscard]] std::optional<std::size_t> worstMinute(const ClassResult& c);

// Erlang C: the mean wait in queue of an M/M/c queue with arrival rate `lambda`, service rate
// `mu` per server and `c` servers; infinity when lambda >= c * mu.
[[nodiscard]] double erlangCMeanWait(double lambda, double mu, int c);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
