// The built-in saturation detectors (utilization and concurrency) and the stage-aware evaluator
// under arbitrary options and telemetry: NaN, infinities, negative, huge and subnormal values,
// missing, stale, future and extreme timestamps, empty pools, any roles and weights, output
// buffers shorter or longer than the pool. Checks:
//   - saturation() is finite and >= 0, reads 1.0 for an empty pool, stays within the documented
//     bounds (utilization: <= kMaxScore; every endpoint unobservable -> exactly 1.0) and is a
//     pure function (the same call twice gives the same value);
//   - filter() writes at most out.size() indices, strictly increasing, each < the pool's size,
//     and exactly the documented ones: the endpoints that pass (a subset of the input), or, for
//     the utilization detector when none passes in a non-empty pool, the original list with
//     failOpen set; the concurrency detector never fails open;
//   - StageSaturationEvaluator: each stage's value is the detector's saturation of that stage's
//     endpoints, the effective value their maximum (or the whole pool's when both are empty);
//   - room() (with any endpoint capacities) writes at most out.size() entries, each slot and KV
//     figure >= 0 (never NaN), {0, 0} for an endpoint the utilization detector does not see as
//     fresh; bandRoom() over them with any footprints (NaN, negative, huge) gives fits >= 0 and
//     fitsAfter <= fits (or -infinity), never NaN.
// Inputs starting with 'L' drive a DispatchLedger instead: registrations, removals
// (with work in flight), dispatches, handle releases, handle-free dispatches and completions
// (including completions without dispatches and huge or negative token counts), marks, scrapes
// with any telemetry and timestamps, and fills. Checks, against a model of every live id:
//   - in-flight requests/tokens equal the model's and never read negative; stale ids read zero;
//   - fill() without a scrape writes no metrics; with invalid scraped telemetry it passes the
//     values through unchanged; with valid telemetry the corrected figures are >= the scraped
//     ones, finite, and KV stays within [0, 1]; with correction off they equal the scrape;
//   - a detector over the filled span stays finite and >= 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "check.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/detector/dispatch_ledger.hpp"
#include "holdback/detector/stage_saturation.hpp"

namespace {

using namespace holdback;
using holdback::fuzz::Input;
using holdback::fuzz::require;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDoubles[] = {0.0,
                               -0.0,
                               0.5,
                               0.8,
                               1.0,
                               0.999999,
                               2.0,
                               5.0,
                               100.0,
                               -1.0,
                               1e-300,
                               std::numeric_limits<double>::denorm_min(),
                               1e308,
                               std::numeric_limits<double>::max(),
                               kInf,
                               -kInf,
                               std::numeric_limits<double>::quiet_NaN()};
constexpr std::int64_t kInts[] = {0,
                                  1,
                                  -1,
                                  5,
                                  99,
                                  100,
                                  1'000'000,
                                  std::numeric_limits<std::int64_t>::max(),
                                  std::numeric_limits<std::int64_t>::min()};

// A special value most of the time (so that thresholds and telemetry meet), raw bytes otherwise.
double pickDouble(Input& in) {
  const std::uint8_t b = in.byte();
  if (b % 4 == 0) return in.take<double>();
  return kDoubles[(b / 4) % std::size(kDoubles)];
}

std::int64_t pickInt(Input& in) {
  const std::uint8_t b = in.byte();
  if (b % 4 == 0) return in.take<std::int64_t>();
  return kInts[(b / 4) % std::size(kInts)];
}

// An offset from `now` in nanoseconds: around the staleness threshold, far away, or raw.
std::int64_t pickOffset(Input& in, std::int64_t threshold) {
  const std::uint8_t b = in.byte();
  switch (b % 8) {
    case 0:
      return 0;
    case 1:
      return threshold;
    case 2:  // threshold is > 0 (create() rejects anything else)
      return threshold < std::numeric_limits<std::int64_t>::max() ? threshold + 1 : threshold;
    case 3:
      return -threshold;
    case 4:
      return -threshold - 1;
    case 5:
      return static_cast<std::int64_t>(b) * 1'000'000;
    default:
      return in.take<std::int64_t>();
  }
}

// now - offset, saturating instead of overflowing.
TimePoint before(TimePoint now, std::int64_t offset) {
  const std::int64_t x = now.time_since_epoch().count();
  std::int64_t y = 0;
  if (__builtin_sub_overflow(x, offset, &y)) {
    y = offset > 0 ? std::numeric_limits<std::int64_t>::min()
                   : std::numeric_limits<std::int64_t>::max();
  }
  return TimePoint(Duration(y));
}

// The indices filter() must write: `passing` in order, or every index when the detector fails
// open and nothing passes; at most `capacity` of them.
void requireFilterResult(const FilterResult& result, std::span<const std::size_t> out,
                         const std::vector<std::size_t>& passing, std::size_t n, bool failsOpen) {
  require(result.kept <= out.size(), "filter writes at most out.size() indices");
  for (std::size_t i = 0; i < result.kept; ++i) {
    require(out[i] < n, "filter returns indices into its input");
    require(i == 0 || out[i - 1] < out[i], "filter keeps the input's order, no duplicates");
  }
  const bool open = failsOpen && passing.empty() && n > 0;
  require(result.failOpen == open, "failOpen exactly when nothing passed (fail-open detectors)");
  const std::size_t expected = open ? n : passing.size();
  require(result.kept == (expected < out.size() ? expected : out.size()),
          "filter keeps every passing endpoint that fits");
  for (std::size_t i = 0; i < result.kept; ++i) {
    require(out[i] == (open ? i : passing[i]),
            open ? "fail-open returns the original list" : "filter keeps exactly what passes");
  }
}

void requireSaturation(double s) {
  require(std::isfinite(s), "saturation is finite");
  require(s >= 0.0, "saturation is >= 0");
}

std::unique_ptr<SaturationDetector> makeDetector(Input& in, bool& utilization) {
  utilization = in.byte() % 2 == 0;
  if (utilization) {
    UtilizationDetectorOptions o;
    o.queueDepthThreshold = pickInt(in);
    o.kvCacheUtilThreshold = pickDouble(in);
    o.metricsStalenessThreshold = Duration(pickInt(in));
    o.headroom = pickDouble(in);
    const std::uint8_t b = in.byte();
    o.aggregation = static_cast<Aggregation>(b % 3);
    o.stalenessPolicy = (b & 4) ? StalenessPolicy::kIgnore : StalenessPolicy::kSaturated;
    auto made = UtilizationDetector::create(o);
    if (!made) return nullptr;
    return std::move(made).value();
  }
  ConcurrencyDetectorOptions o;
  o.mode = static_cast<ConcurrencyMode>(in.byte() % 3);
  o.maxConcurrency = pickInt(in);
  o.maxTokenConcurrency = pickInt(in);
  o.headroom = pickDouble(in);
  auto made = ConcurrencyDetector::create(o);
  if (!made) return nullptr;
  return std::move(made).value();
}

void checkUtilization(const UtilizationDetector& d, std::span<const Endpoint> pool, TimePoint now,
                      double s, const FilterResult& result, std::span<const std::size_t> out) {
  std::vector<std::size_t> passing;
  bool all_unobservable = !pool.empty();
  for (std::size_t i = 0; i < pool.size(); ++i) {
    const UtilizationDetector::Observation o = d.observe(pool[i], now);
    if (o == UtilizationDetector::Observation::kFresh) all_unobservable = false;
    // Stale (and, with strict validation, invalid) endpoints leave the aggregate under the
    // ignore policy instead of scoring 1.0.
    const bool like_stale = o == UtilizationDetector::Observation::kStale ||
                            (o == UtilizationDetector::Observation::kInvalid &&
                             d.options().telemetryValidation == TelemetryValidation::kStrict);
    if (like_stale && d.options().stalenessPolicy == StalenessPolicy::kIgnore) {
      all_unobservable = false;
    }
    if (o == UtilizationDetector::Observation::kFresh &&
        pool[i].waitingQueueSize < d.queueLimit() && pool[i].kvCacheUsage < d.kvCacheLimit()) {
      passing.push_back(i);
    }
  }
  require(s <= UtilizationDetector::kMaxScore * (1 + 1e-12), "scores are capped at kMaxScore");
  if (all_unobservable) require(s == 1.0, "an unobservable pool reads exactly 1.0");
  requireFilterResult(result, out, passing, pool.size(), /*failsOpen=*/true);
}

void checkConcurrency(const ConcurrencyDetector& d, std::span<const Endpoint> pool,
                      const FilterResult& result, std::span<const std::size_t> out) {
  std::vector<std::size_t> passing;
  for (std::size_t i = 0; i < pool.size(); ++i) {
    const Endpoint& e = pool[i];
    if (e.inFlightRequests < 0 || e.inFlightTokens < 0) continue;
    const bool requests = d.requestLimit().admits(e.inFlightRequests);
    const bool tokens = d.tokenLimit().admits(e.inFlightTokens);
    const ConcurrencyMode mode = d.options().mode;
    if ((mode == ConcurrencyMode::kRequests && requests) ||
        (mode == ConcurrencyMode::kTokens && tokens) ||
        (mode == ConcurrencyMode::kHybrid && requests && tokens)) {
      passing.push_back(i);
    }
  }
  requireFilterResult(result, out, passing, pool.size(), /*failsOpen=*/false);
}

// Each stage's value is the detector's saturation of that stage's endpoints.
void checkStages(const SaturationDetector& d, std::span<const Endpoint> pool, TimePoint now) {
  static StageSaturationEvaluator evaluator;  // reused across inputs, as a controller reuses it
  const StageSaturation stages = evaluator.evaluate(d, pool, now);
  requireSaturation(stages.effective);
  std::vector<Endpoint> prefill;
  std::vector<Endpoint> decode;
  for (const Endpoint& e : pool) {
    if (inPrefillStage(e.role)) prefill.push_back(e);
    if (inDecodeStage(e.role)) decode.push_back(e);
  }
  require(stages.prefill.has_value() == !prefill.empty(), "prefill evaluated iff non-empty");
  require(stages.decode.has_value() == !decode.empty(), "decode evaluated iff non-empty");
  if (stages.prefill) require(*stages.prefill == d.saturation(prefill, now), "prefill stage");
  if (stages.decode) require(*stages.decode == d.saturation(decode, now), "decode stage");
  if (!stages.prefill && !stages.decode) {
    require(stages.effective == d.saturation(pool, now), "no stage: the whole pool");
  } else {
    require(stages.effective == std::max(stages.prefill.value_or(0.0), stages.decode.value_or(0.0)),
            "effective = max of the stages");
  }
}

// ---- the dispatch ledger ----------------------------------------------------------------------

struct ModelEndpoint {
  EndpointId id;
  std::int64_t requests = 0;  // handle-free dispatches not yet completed
  std::int64_t tokens = 0;
  std::vector<DispatchHandle> handles;
  std::optional<Scrape> scrape;
  std::int64_t maxRunning = 0;  // the configured slot count (registration's capacity)
};

bool validScrape(const Scrape& s) {
  const auto ok = [](double v) { return v >= 0.0 && v <= std::numeric_limits<double>::max(); };
  return ok(s.waitingQueueSize) && ok(s.runningRequests) && s.kvCacheUsage >= 0.0 &&
         s.kvCacheUsage <= 1.0;
}

bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

void checkLoad(const DispatchLedger& ledger, const ModelEndpoint& m) {
  std::int64_t requests = m.requests;
  std::int64_t tokens = m.tokens;
  for (const DispatchHandle& h : m.handles) {
    requests += h.active() ? 1 : 0;
    tokens += h.tokens();
  }
  const InFlightLoad l = ledger.load(m.id);
  require(l.requests == requests, "in-flight requests match the model");
  require(l.tokens == tokens, "in-flight tokens match the model");
}

void runLedger(Input& in) {
  const std::uint8_t flags = in.byte();
  DispatchLedgerOptions options;
  options.correction = (flags & 1) == 0;
  options.dispatchBudget = (flags & 2) != 0;
  options.scrapeMarginRequests = pickInt(in);
  options.budgetQueueDepth = pickInt(in);
  // From the flag byte (no extra input byte, so the corpus keeps its meaning): 0..31, 0 sanitized.
  options.replicas = (flags & 4) != 0 ? (flags >> 3) : 1;
  options.creditCompletions = (flags & 64) != 0;
  options.reconcileInFlight = (flags & 128) == 0;
  DispatchLedger ledger(options);
  std::vector<ModelEndpoint> live;  // declared after the ledger: handles die first
  std::vector<EndpointId> dead;
  std::vector<DispatchHandle> orphans;  // handles of removed endpoints
  auto detector = std::move(UtilizationDetector::create({})).value();

  for (int step = 0; step < 256 && !in.empty(); ++step) {
    const std::uint8_t op = in.byte();
    ModelEndpoint* m = live.empty() ? nullptr : &live[in.byte() % live.size()];
    switch (op % 10) {
      case 0: {  // register (names from a small set, so re-registration happens)
        const std::string name = "e" + std::to_string(in.byte() % 6);
        EndpointCapacity cap{pickInt(in), pickInt(in)};
        const EndpointId id = ledger.registerEndpoint(name, cap);
        require(id.valid(), "registration succeeds below kMaxEndpoints");
        bool known = false;
        for (ModelEndpoint& e : live) {
          if (e.id == id) {
            known = true;
            e.maxRunning = cap.maxRunningRequests;
          }
        }
        if (!known) live.push_back({.id = id, .maxRunning = cap.maxRunningRequests});
        require(ledger.find(name) == id, "find returns the registered id");
        m = nullptr;  // push_back may have moved the model
        break;
      }
      case 1:  // remove, possibly with work in flight
        if (m != nullptr) {
          require(ledger.removeEndpoint(m->id), "a live id can be removed");
          require(!ledger.removeEndpoint(m->id), "a removed id cannot be removed again");
          dead.push_back(m->id);
          for (DispatchHandle& h : m->handles) orphans.push_back(std::move(h));
          if (m != &live.back()) *m = std::move(live.back());
          live.pop_back();
          m = nullptr;
        }
        break;
      case 2:
        if (m != nullptr) {
          m->handles.push_back(ledger.dispatch(m->id, pickInt(in)));
          require(m->handles.back().active(), "dispatch to a live id counts");
          require(m->handles.back().tokens() >= 0 &&
                      m->handles.back().tokens() <= DispatchLedger::kMaxTokensPerRequest,
                  "tokens are clamped");
        }
        break;
      case 3:
        if (m != nullptr && !m->handles.empty()) {
          const std::size_t k = in.byte() % m->handles.size();
          if (in.byte() % 2 == 0) {
            m->handles[k].releaseTokens();
          } else {
            m->handles[k].release();
          }
        }
        break;
      case 4:
        if (m != nullptr) {
          const std::int64_t t = pickInt(in);
          require(ledger.recordDispatch(m->id, t), "recordDispatch on a live id");
          m->requests += 1;
          m->tokens += t < 0 ? 0 : std::min(t, DispatchLedger::kMaxTokensPerRequest);
        }
        break;
      case 5:
        if (m != nullptr) {
          // Handle-free completions only for handle-free dispatches (a completion that a handle
          // also reports would be a double completion, a host bug the ledger cannot detect).
          std::int64_t t = pickInt(in);
          const bool held = std::any_of(m->handles.begin(), m->handles.end(),
                                        [](const DispatchHandle& h) { return h.active(); });
          if (m->requests > 0) {
            if (t > m->tokens) t = m->tokens;
            require(ledger.recordCompletion(m->id, t), "a completion of a recorded dispatch");
            m->requests -= 1;
            m->tokens -= t < 0 ? 0 : std::min(t, DispatchLedger::kMaxTokensPerRequest);
          } else if (!held) {
            require(!ledger.recordCompletion(m->id, t), "a completion without a dispatch");
          }
        }
        break;
      case 6:
      case 7:
        if (m != nullptr) {
          const ScrapeMark mark = ledger.mark(m->id);
          const TimePoint now(Duration(pickInt(in)));
          Scrape s{before(now, pickInt(in)), pickDouble(in), pickDouble(in), pickDouble(in)};
          require(
              op % 10 == 6 ? ledger.installScrape(m->id, s, mark) : ledger.installScrape(m->id, s),
              "installScrape on a live id");
          m->scrape = s;
          // The slot count in use: the configured one (clamped to 32 bits), else the observed one,
          // which a correctable scrape showing a queue sets to its running figure (capped).
          const std::int64_t slots = ledger.slotCount(m->id);
          if (m->maxRunning > 0) {
            require(slots == std::min(m->maxRunning, DispatchLedger::kMaxConfiguredSlots),
                    "a configured slot count is the one in use");
          } else {
            require(slots >= 0 && slots <= DispatchLedger::kMaxObservedSlots,
                    "the observed slot count stays within its cap");
            if (options.slotCountFromScrapes && validScrape(s) && s.waitingQueueSize < 1e300 &&
                s.runningRequests < 1e300 && s.waitingQueueSize > 0.0) {
              const double shown = std::floor(std::min(
                  s.runningRequests, static_cast<double>(DispatchLedger::kMaxObservedSlots)));
              require(slots == static_cast<std::int64_t>(shown),
                      "a scrape showing a queue restarts the observed slot count");
            }
          }
        }
        break;
      default: {  // fill and check
        std::vector<Endpoint> endpoints(live.size() + dead.size());
        std::vector<EndpointId> ids;
        for (const ModelEndpoint& e : live) ids.push_back(e.id);
        for (const EndpointId& id : dead) ids.push_back(id);
        ledger.fill(endpoints, ids);
        for (std::size_t k = 0; k < live.size(); ++k) {
          const Endpoint& e = endpoints[k];
          const ModelEndpoint& me = live[k];
          require(e.inFlightRequests >= 0 && e.inFlightTokens >= 0, "fill: never negative");
          const InFlightLoad l = ledger.load(me.id);
          require(e.inFlightRequests == l.requests && e.inFlightTokens == l.tokens,
                  "fill writes the in-flight counts");
          if (!me.scrape) {
            require(!e.updateTime, "no scrape: no metrics");
            continue;
          }
          const Scrape& s = *me.scrape;
          require(e.updateTime == s.updateTime, "fill writes the scrape's time");
          if (!validScrape(s) || !options.correction) {
            if (!validScrape(s) || !options.dispatchBudget) {
              require(same(e.waitingQueueSize, s.waitingQueueSize), "waiting passed through");
            }
            require(same(e.runningRequests, s.runningRequests), "running passed through");
            require(same(e.kvCacheUsage, s.kvCacheUsage), "KV passed through");
          } else {
            if (options.creditCompletions) {
              require(e.waitingQueueSize >= 0.0 && e.runningRequests >= 0.0,
                      "credited figures never negative");
            } else {
              require(e.waitingQueueSize >= s.waitingQueueSize, "correction never lowers waiting");
              require(e.runningRequests >= s.runningRequests, "correction never lowers running");
            }
            require(e.kvCacheUsage >= s.kvCacheUsage && e.kvCacheUsage <= 1.0,
                    "corrected KV within [scraped, 1]");
            require(std::isfinite(e.waitingQueueSize) && std::isfinite(e.runningRequests),
                    "corrected figures are finite");
          }
        }
        for (std::size_t k = live.size(); k < endpoints.size(); ++k) {
          require(!endpoints[k].updateTime && endpoints[k].inFlightRequests == 0,
                  "a removed id fills as unknown");
        }
        const double s = detector->saturation(endpoints, TimePoint(Duration(pickInt(in))));
        requireSaturation(s);
        break;
      }
    }
    if (m != nullptr) checkLoad(ledger, *m);
  }
  for (const EndpointId& id : dead) {
    require(ledger.load(id).requests == 0, "a removed id reads zero");
    require(!ledger.dispatch(id).active(), "dispatch to a removed id counts nothing");
  }
  orphans.clear();
  live.clear();
}

}  // namespace

// room() and bandRoom() (see the file comment); `capacity` is the output buffer's size.
void checkRoom(const SaturationDetector& d, std::span<const Endpoint> pool, TimePoint now,
               bool utilization, double protectedTokens, double ownTokens, std::size_t capacity) {
  std::vector<EndpointRoom> room(capacity, EndpointRoom{-7.0, -7.0});
  require(d.room(pool, now, room), "the built-in detectors have a capacity model");
  const std::size_t written = std::min(capacity, pool.size());
  for (std::size_t i = 0; i < capacity; ++i) {
    if (i >= written) {
      require(room[i].slots == -7.0 && room[i].kvTokens == -7.0, "room past the pool untouched");
      continue;
    }
    require(room[i].slots >= 0.0 && room[i].kvTokens >= 0.0, "room is >= 0 and never NaN");
    if (utilization && static_cast<const UtilizationDetector&>(d).observe(pool[i], now) !=
                           UtilizationDetector::Observation::kFresh) {
      require(room[i].slots == 0.0 && room[i].kvTokens == 0.0, "no room on an unseen endpoint");
    }
  }
  const BandRoom band =
      bandRoom(std::span<const EndpointRoom>(room.data(), written), protectedTokens, ownTokens);
  require(band.fits >= 0.0, "fits >= 0, never NaN");
  require(band.fitsAfter <= band.fits, "fitsAfter <= fits, never NaN");
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 0 && data[0] == 'L') {
    Input ledger_input(data + 1, size - 1);
    runLedger(ledger_input);
    return 0;
  }
  Input in(data, size);
  bool utilization = false;
  const std::unique_ptr<SaturationDetector> detector = makeDetector(in, utilization);
  if (detector == nullptr) return 0;  // invalid options are rejected by create(): fine
  const std::int64_t threshold = utilization ? static_cast<const UtilizationDetector&>(*detector)
                                                   .options()
                                                   .metricsStalenessThreshold.count()
                                             : 0;

  for (int round = 0; round < 4 && !in.empty(); ++round) {
    const TimePoint now(Duration(pickInt(in)));
    std::vector<Endpoint> pool(in.byte() % 17);
    for (Endpoint& e : pool) {
      const std::uint8_t f = in.byte();
      if (f % 4 != 0) e.updateTime = before(now, pickOffset(in, threshold));
      if (f & 4) e.waitingQueueSize = pickDouble(in);
      if (f & 8) e.kvCacheUsage = pickDouble(in);
      if (f & 16) e.runningRequests = pickDouble(in);
      if (f & 32) e.inFlightRequests = pickInt(in);
      if (f & 64) e.inFlightTokens = pickInt(in);
      if (f & 128) e.weight = pickDouble(in);
      const std::uint8_t c = in.byte();
      if (c & 1) e.maxRunningRequests = pickInt(in);
      if (c & 2) e.kvCapacityTokens = pickInt(in);
      const std::uint8_t r = in.byte();
      e.role = (r % 2) ? EndpointRole::kDecode : static_cast<EndpointRole>(r / 2 % 7);
    }
    const double s = detector->saturation(pool, now);
    requireSaturation(s);
    if (pool.empty()) require(s == 1.0, "an empty pool reads 1.0");
    require(detector->saturation(pool, now) == s, "saturation is a pure function");

    // An output buffer of the pool's size, shorter, or longer.
    const std::uint8_t b = in.byte();
    const std::size_t capacity = (b % 3 == 0)   ? pool.size()
                                 : (b % 3 == 1) ? (b / 3) % (pool.size() + 1)
                                                : pool.size() + 3;
    std::vector<std::size_t> out(capacity, static_cast<std::size_t>(-1));
    const FilterResult result = detector->filter(pool, now, out);
    const std::span<const std::size_t> written(out);
    if (utilization) {
      checkUtilization(static_cast<const UtilizationDetector&>(*detector), pool, now, s, result,
                       written);
    } else {
      checkConcurrency(static_cast<const ConcurrencyDetector&>(*detector), pool, result, written);
    }
    checkStages(*detector, pool, now);
    checkRoom(*detector, pool, now, utilization, pickDouble(in), pickDouble(in),
              in.byte() % (pool.size() + 2));
  }
  return 0;
}
