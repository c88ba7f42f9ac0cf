// Upstream's eviction benchmark shapes against the real FlowController (see
// src/sim/eviction_bench.hpp for the model).
#include "sim/eviction_bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"
#include "sim/engine.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

namespace {

using std::chrono::milliseconds;

constexpr Priority kHigh = 100;
constexpr Priority kSheddable = -1;
constexpr Duration kSustainedService = milliseconds(250);

// A detector is required by FlowController::create; the bench passes its own pressure.
class UnusedDetector final : public SaturationDetector {
 public:
  UnusedDetector() : SaturationDetector("eviction-bench") {}
  double saturation(std::span<const Endpoint>, TimePoint) const noexcept override { return 0.0; }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "eviction-bench"; }
};

class Bench {
 public:
  explicit Bench(const EvictionBenchCase& c) : c_(c), rng_(c.seed) {}

  EvictionBenchResult run() {
    FlowControllerOptions o;
    o.policy = std::move(StaticUsageLimitPolicy::create({.threshold = c_.ceiling})).value();
    o.detector = std::make_shared<UnusedDetector>();
    o.endpoints = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1));
    o.onOutcome = [](Completion&&) {};
    o.bands = {{.priority = kHigh}, {.priority = 0}, {.priority = kSheddable}};
    o.defaultRequestTtl = Duration{0};  // never expire within the run
    o.leaseTimeout = std::chrono::hours(1);
    o.eviction.enabled = c_.eviction;
    o.eviction.maxRevocationsPerDecision = c_.cap;
    o.eviction.confirmationGrace = c_.grace;
    if (c_.waitTolerance > Duration{0}) {
      o.eviction.waitForReleases = {.enabled = true, .tolerance = c_.waitTolerance};
    }
    o.eviction.footprintAware = c_.footprintAware;
    o.eviction.evict = [this](const Revocation& r) {
      terminations_.emplace(r.issuedAt + c_.terminationLatency, r.id);
      r_.tokensLost += r.generatedTokens;
    };
    fc_ = std::move(FlowController::create(std::move(o))).value();

    // Preload: S sheddable leases, one second before the burst (churn reaches steady state).
    const TimePoint start = at(-1000);
    if (c_.heterogeneous) {
      while (occupied_ < c_.capacity) {  // fill the pool with leases of 1-3 units
        enqueueSheddable(start);
        cycles(start, /*preload=*/true);
      }
    } else {
      for (std::size_t i = 0; i < c_.sheddable; ++i) enqueueSheddable(start);
      cycles(start, /*preload=*/true);
    }

    std::deque<TimePoint> arrivals;
    const std::size_t k = c_.shape == BurstShape::kSingle    ? 1
                          : c_.shape == BurstShape::kBatch32 ? 32
                                                             : 300;
    for (std::size_t i = 0; i < k; ++i) {
      arrivals.push_back(c_.shape == BurstShape::kSustained ? at(10 * static_cast<long long>(i))
                                                            : at(0));
    }
    r_.highRequests = k;
    if (c_.shape != BurstShape::kSustained &&
        !c_.heterogeneous) {  // the minimum is in 1-unit leases
      const MinEvictions m = minEvictionsRequired(c_.sheddable, k, c_.capacity, c_.ceiling);
      r_.minEvictions = m.evictions;
      r_.minAdmits = m.admits;
    }

    const auto end_ms = std::chrono::duration_cast<milliseconds>(c_.horizon).count();
    for (long long ms = -999; ms <= end_ms; ++ms) {
      const TimePoint now = at(ms);
      endDue(now);
      if (c_.heterogeneous && ms % 10 == 0) reportTokens(now);
      while (!arrivals.empty() && arrivals.front() <= now) {
        FlowRequest r;
        r.flowId = "interactive";
        r.priority = kHigh;
        const RequestId id = fc_->enqueue(std::move(r), now).id();
        high_arrival_[id] = now;
        arrivals.pop_front();
      }
      cycles(now, false);
      const bool all_admitted = r_.admitted == r_.highRequests;
      if (all_admitted && (c_.shape != BurstShape::kSustained || completed_ == r_.highRequests)) {
        last_ms_ = static_cast<double>(ms);
        break;
      }
      last_ms_ = static_cast<double>(ms);
    }

    const EvictionStats st = fc_->stats().eviction;
    r_.revocations = st.issued;
    r_.confirmed = st.confirmed;
    r_.deferred = st.deferred;
    const Percentiles waits = detail::percentiles(waits_);  // the simulator's nearest-rank rule
    r_.waitP50Ms = waits.p50;
    r_.waitP95Ms = waits.p95;
    if (r_.minEvictions && c_.eviction && c_.churnMean == Duration{0}) {
      r_.overEviction =
          static_cast<long long>(r_.revocations) - static_cast<long long>(*r_.minEvictions);
    }
    if (c_.shape == BurstShape::kSustained) {
      r_.goodput = last_completion_ms_ > 0
                       ? static_cast<double>(completed_) / (last_completion_ms_ / 1000.0)
                       : 0.0;
    } else if (r_.lastAdmissionMs) {
      r_.goodput = static_cast<double>(r_.admitted) / (std::max(*r_.lastAdmissionMs, 1.0) / 1000.0);
    }
    fc_->shutdown(at(static_cast<long long>(last_ms_)));
    return r_;
  }

 private:
  struct Running {
    bool high = false;
    std::size_t units = 1;
    TimePoint since{};
    double rate = 0.0;  // tokens per second (heterogeneous sheddable leases)
  };

  void reportTokens(TimePoint now) {
    for (const auto& [id, run] : running_) {
      if (run.high) continue;
      const double secs = std::chrono::duration<double>(now - run.since).count();
      const auto generated = static_cast<std::uint64_t>(run.rate * std::max(0.0, secs));
      fc_->ticket(id).updateLease(100 * run.units + generated, generated);
    }
  }

  static TimePoint at(long long ms) {
    return TimePoint{} + std::chrono::hours(1) + milliseconds(ms);
  }
  static double msOf(TimePoint t) {
    return std::chrono::duration<double, std::milli>(t - at(0)).count();
  }

  void enqueueSheddable(TimePoint now) {
    FlowRequest r;
    r.flowId = "batch";
    r.priority = kSheddable;
    fc_->enqueue(std::move(r), now);
  }

  // The sensor: occupancy with freed units visible only after the lag.
  double saturation(TimePoint now) {
    while (!invisible_.empty() && invisible_.front() <= now) invisible_.pop_front();
    return static_cast<double>(occupied_ + invisible_.size()) / static_cast<double>(c_.capacity);
  }

  // Frees request `id`'s unit and ends its lease (for a revoked one: the confirmation).
  void end(RequestId id, TimePoint now) {
    const auto it = running_.find(id);
    if (it == running_.end()) return;  // ended already (e.g. churn before its termination)
    const bool high = it->second.high;
    const std::size_t units = it->second.units;
    running_.erase(it);
    occupied_ -= units;
    for (std::size_t u = 0; u < units; ++u) invisible_.push_back(now + c_.lag());
    fc_->release(id, now);
    if (high) {
      completed_ += 1;
      last_completion_ms_ = msOf(now);
    }
  }

  void endDue(TimePoint now) {
    for (auto* events : {&terminations_, &completions_}) {
      while (!events->empty() && events->begin()->first <= now) {
        const RequestId id = events->begin()->second;
        events->erase(events->begin());
        end(id, now);
      }
    }
    while (!churn_.empty() && churn_.begin()->first <= now) {
      const RequestId id = churn_.begin()->second;
      churn_.erase(churn_.begin());
      if (running_.count(id) != 0) {
        r_.churned += 1;
        end(id, now);
        enqueueSheddable(now);  // closed loop: the batch client sends the next one
      }
    }
  }

  void cycles(TimePoint now, bool preload) {
    for (;;) {
      PoolPressure p;
      p.saturation.effective = preload ? 0.0 : saturation(now);
      const DispatchResult d = fc_->dispatch(now, p);
      if (d.revoked > 0) r_.decisions += 1;
      if (d.kind != DispatchResult::Kind::kDispatched) return;
      const bool high = d.priority == kHigh;
      Running run{high, 1, now, 0.0};
      if (!high && c_.heterogeneous) {
        const std::size_t n = sheddable_seq_++;
        run.units = std::min<std::size_t>(1 + (n * 7) % 3,
                                          c_.capacity - std::min(occupied_, c_.capacity - 1));
        run.rate = 20.0 * static_cast<double>(1 + (n * 3) % 5);
        run.since = now - milliseconds(static_cast<long long>((n * 37) % 900));  // ages differ
      }
      occupied_ += run.units;
      running_[d.id] = run;
      if (high) {
        const double wait = msOf(now) - msOf(high_arrival_[d.id]);
        waits_.push_back(wait);
        r_.admitted += 1;
        if (!r_.firstReliefMs) r_.firstReliefMs = msOf(now);
        r_.lastAdmissionMs = msOf(now);
        if (c_.shape == BurstShape::kSustained) completions_.emplace(now + kSustainedService, d.id);
      } else if (c_.churnMean > Duration{0}) {
        std::exponential_distribution<double> hold(
            1.0 / std::chrono::duration<double, std::milli>(c_.churnMean).count());
        churn_.emplace(now + milliseconds(1 + static_cast<long long>(hold(rng_))), d.id);
      }
    }
  }

  const EvictionBenchCase& c_;
  std::mt19937_64 rng_;
  std::unique_ptr<FlowController> fc_;
  EvictionBenchResult r_;
  std::size_t occupied_ = 0;
  std::deque<TimePoint> invisible_;  // when each freed unit becomes visible (non-decreasing)
  std::unordered_map<RequestId, Running> running_;
  std::unordered_map<RequestId, TimePoint> high_arrival_;
  std::multimap<TimePoint, RequestId> terminations_;
  std::multimap<TimePoint, RequestId> completions_;
  std::multimap<TimePoint, RequestId> churn_;
  std::vector<double> waits_;
  std::size_t completed_ = 0;
  std::size_t sheddable_seq_ = 0;
  double last_completion_ms_ = 0.0;
  double last_ms_ = 0.0;
};

std::string fmt(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string_view toString(BurstShape shape) noexcept {
  switch (shape) {
    case BurstShape::kSingle:
      return "single";
    case BurstShape::kBatch32:
      return "batch32";
    case BurstShape::kSustained:
      return "sustained";
  }
  return "unknown";
}

std::string_view toString(SensorProfile sensor) noexcept {
  return sensor == SensorProfile::kInFlight ? "in-flight" : "lagging";
}

MinEvictions minEvictionsRequired(std::size_t s, std::size_t k, std::size_t c, double h) noexcept {
  const long long max_below = static_cast<long long>(std::ceil(h * static_cast<double>(c))) - 1;
  if (max_below < 0) return {0, 0};
  const auto admittable =
      static_cast<long long>(std::min<long long>(static_cast<long long>(k), max_below + 1));
  const long long need = static_cast<long long>(s) + admittable - 1 - max_below;
  const long long ev = std::min<long long>(static_cast<long long>(s), std::max(0LL, need));
  return {static_cast<std::size_t>(ev), static_cast<std::size_t>(admittable)};
}

EvictionBenchResult runEvictionBench(const EvictionBenchCase& c) {
  return Bench(c).run();
}

std::vector<EvictionBenchCase> evictionBenchMatrix() {
  std::vector<EvictionBenchCase> out;
  for (BurstShape shape : {BurstShape::kSingle, BurstShape::kBatch32, BurstShape::kSustained}) {
    for (SensorProfile sensor : {SensorProfile::kInFlight, SensorProfile::kLagging}) {
      for (int g : {5, 50, 200, 500}) {
        EvictionBenchCase c;
        c.shape = shape;
        c.sensor = sensor;
        c.grace = milliseconds(g);
        out.push_back(c);
      }
      EvictionBenchCase off;
      off.shape = shape;
      off.sensor = sensor;
      off.eviction = false;
      off.churnMean = milliseconds(500);
      out.push_back(off);
      EvictionBenchCase churn = off;  // eviction on top of natural churn, matched grace
      churn.eviction = true;
      churn.grace = sensor == SensorProfile::kInFlight ? milliseconds(10) : milliseconds(500);
      out.push_back(churn);
      EvictionBenchCase wait = churn;  // holdback: wait-vs-evict
      wait.waitTolerance = milliseconds(500);
      out.push_back(wait);
    }
    if (shape != BurstShape::kSustained) {
      for (SensorProfile sensor : {SensorProfile::kInFlight, SensorProfile::kLagging}) {
        for (std::size_t cap : {1, 5}) {  // upstream: the cap has negligible effect
          EvictionBenchCase k;
          k.shape = shape;
          k.sensor = sensor;
          k.grace = sensor == SensorProfile::kInFlight ? milliseconds(50) : milliseconds(500);
          k.cap = cap;
          out.push_back(k);
        }
      }
      for (bool aware : {false, true}) {  // footprints 1-3 units: upstream sizing vs holdback's
        EvictionBenchCase h;
        h.shape = shape;
        h.grace = milliseconds(10);
        h.heterogeneous = true;
        h.footprintAware = aware;
        out.push_back(h);
      }
    }
    EvictionBenchCase none;  // eviction off, no churn: no relief at all
    none.shape = shape;
    none.eviction = false;
    none.horizon = std::chrono::seconds(5);
    out.push_back(none);
  }
  return out;
}

std::string formatEvictionBenchTable(const std::vector<EvictionBenchCase>& cases,
                                     const std::vector<EvictionBenchResult>& results) {
  std::ostringstream s;
  s << "| shape | sensor | mode | grace ms | first relief ms | last admit ms | admitted | "
       "wait p50/p95 ms | revocations | min | over | goodput /s | tokens lost |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < cases.size() && i < results.size(); ++i) {
    const EvictionBenchCase& c = cases[i];
    const EvictionBenchResult& r = results[i];
    std::string mode = c.eviction ? "evict" : "off";
    if (c.churnMean > Duration{0}) mode += "+churn";
    if (c.waitTolerance > Duration{0}) mode += "+wait";
    if (c.heterogeneous)
      mode += c.footprintAware ? " (1-3 units, footprint-aware)" : " (1-3 units)";
    if (c.cap != 2) mode += " cap " + std::to_string(c.cap);
    const auto ms = [](Duration d) {
      return fmt(std::chrono::duration<double, std::milli>(d).count());
    };
    s << "| " << toString(c.shape) << " | " << toString(c.sensor) << " | " << mode << " | "
      << (c.eviction ? ms(c.grace) : "-") << " | "
      << (r.firstReliefMs ? fmt(*r.firstReliefMs) : "none") << " | "
      << (r.lastAdmissionMs ? fmt(*r.lastAdmissionMs) : "-") << " | " << r.admitted << "/"
      << r.highRequests << " | "
      << (r.admitted > 0 ? fmt(r.waitP50Ms) + " / " + fmt(r.waitP95Ms) : std::string("-")) << " | "
      << r.revocations << " | " << (r.minEvictions ? std::to_string(*r.minEvictions) : "-") << " | "
      << (r.overEviction ? std::to_string(*r.overEviction) : "-") << " | " << fmt(r.goodput, 1)
      << " | " << (c.heterogeneous ? std::to_string(r.tokensLost) : "-") << " |\n";
  }
  return s.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
