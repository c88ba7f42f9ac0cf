// Measurement (src/sim/engine.hpp): the gateway sampled every sampleInterval, and the per class and
// window figures (percentiles, completions and output tokens per second) of a finished run.
#include "sim/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
namespace detail {

void Simulation::sample() {
  // The saturation the gateways see (the mean over the replicas' views).
  double saturation = 0.0;
  for (const Gateway& gw : gateways_) {
    saturation += detector_->saturation(gw.source->pool(), at(now_));
  }
  saturation /= static_cast<double>(gateways_.size());
  if (now_ < end_) {
    saturations_.push_back(saturation);
    std::size_t busy = 0;
    for (const Server& sv : servers_) busy += sv.queue.size() + sv.running.size();
    poolLoads_.push_back(static_cast<double>(busy) / static_cast<double>(s_.pool.totalSlots()));
  }
  if (!options_.collectSeries) return;
  IntervalSample s;
  s.time = toSeconds(now_);
  s.saturation = saturation;
  s.ceilings.assign(s_.classes.size(), kNoValue);
  s.queued.assign(s_.classes.size(), 0);
  for (std::size_t g = 0; g < gateways_.size(); ++g) {
    if (!gateways_[g].fc) continue;
    const FlowControllerStats stats = gateways_[g].fc->stats();
    for (std::size_t c = 0; c < s_.classes.size(); ++c) {
      for (const BandStats& b : stats.bands) {
        if (b.priority != s_.classes[c].priority) continue;
        if (b.lastCeiling && g == 0) s.ceilings[c] = *b.lastCeiling;  // replica 0's
        s.queued[c] += b.queuedRequests;  // classes sharing a priority share a band
      }
    }
  }
  for (const Server& sv : servers_) {
    s.serverQueue.push_back(sv.queue.size());
    s.running.push_back(sv.running.size());
    s.kvTokens.push_back(sv.kvTokens);
  }
  samples_.push_back(std::move(s));
}

// Queued, on a server or running when the run ended.
bool unfinishedState(State s) {
  return s == State::kQueued || s == State::kServerQueue || s == State::kRunning;
}

// The minute windows of class c: requests by the minute they arrived in (completions by the
// minute they finished in), one bucket lookup per request.
std::vector<WindowStats> Simulation::minuteWindows(std::size_t c) const {
  const Nanos minute = fromSeconds(kMinuteSeconds);
  const auto nm = static_cast<std::size_t>((end_ + minute - 1) / minute);
  std::vector<WindowStats> out(nm);
  std::vector<std::vector<double>> queue(nm), wait(nm), ttft(nm);
  std::vector<double> done(nm, 0.0), tokens(nm, 0.0);
  for (const Request& r : requests_) {
    if (r.cls != c) continue;
    if (r.state == State::kDone && r.finished >= 0 && r.finished < end_) {
      const auto m = static_cast<std::size_t>(r.finished / minute);
      done[m] += 1.0;
      tokens[m] += static_cast<double>(r.output);
    }
    if (r.arrival < 0 || r.arrival >= end_) continue;
    const auto m = static_cast<std::size_t>(r.arrival / minute);
    WindowStats& w = out[m];
    ++w.arrived;
    w.rejected += r.state == State::kRejected ? 1 : 0;
    w.evicted += r.state == State::kEvicted ? 1 : 0;
    w.tooLarge += r.state == State::kTooLarge ? 1 : 0;
    w.unfinished += unfinishedState(r.state) ? 1 : 0;
    if (r.dispatched >= 0) queue[m].push_back(static_cast<double>(r.dispatched - r.arrival) / 1e6);
    if (r.admitted >= 0) wait[m].push_back(static_cast<double>(r.admitted - r.dispatched) / 1e6);
    if (r.firstToken >= 0 && r.firstToken <= now_) {
      ttft[m].push_back(static_cast<double>(r.firstToken - r.arrival) / 1e6);
    }
  }
  for (std::size_t m = 0; m < nm; ++m) {
    WindowStats& w = out[m];
    w.window = "minute-" + std::to_string(m);
    w.startSeconds = static_cast<double>(m) * kMinuteSeconds;
    w.seconds = toSeconds(std::min(end_, static_cast<Nanos>(m + 1) * minute)) - w.startSeconds;
    w.queueMs = percentiles(queue[m]);
    w.serverWaitMs = percentiles(wait[m]);
    w.ttftMs = percentiles(ttft[m]);
    w.completedPerSecond = done[m] / w.seconds;
    w.outputTokensPerSecond = tokens[m] / w.seconds;
  }
  return out;
}

Percentiles percentiles(std::vector<double>& v) {
  Percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
  };
  p.p50 = rank(0.50);
  p.p95 = rank(0.95);
  p.p99 = rank(0.99);
  double sum = 0.0;
  for (const double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

ArmResult Simulation::collect() {
  ArmResult out;
  out.arm = arm_;
  out.detector = s_.detector;
  out.cycles = cycles_;
  out.truncated = truncated_;
  out.cyclesWithWork = cyclesWithWork_;
  out.gatedCycles = gatedCycles_;
  double sum = 0.0;
  for (const double x : saturations_) sum += x;
  out.meanSaturation = saturations_.empty() ? 0.0 : sum / static_cast<double>(saturations_.size());
  out.saturationP99 = percentiles(saturations_).p99;
  double load = 0.0;
  for (const double x : poolLoads_) load += x;
  out.poolLoadMean = poolLoads_.empty() ? 0.0 : load / static_cast<double>(poolLoads_.size());
  out.poolLoadP99 = percentiles(poolLoads_).p99;
  out.maxServerQueue = maxServerQueue_;
  out.dispatchesPerScrape = percentiles(dispatchesPerScrape_);
  out.dispatchesPerScrapeMax = dispatchesPerScrape_.empty() ? 0.0 : dispatchesPerScrape_.back();
  out.revocationsIssued = revocationsIssued_;
  out.revocationsConfirmed = revocationsConfirmed_;
  out.revocationsTimedOut = revocationsTimedOut_;
  out.inFlightEvictions = aborted_;
  out.wastedTokens = wastedTokens_;
  out.repaidPrefillTokens = repaidPrefillTokens_;
  out.preemptions = preemptions_;
  out.recomputedTokens = recomputedTokens_;

  // The windows (a time may be in several: onset and settled split burst, everything is in all)
  // and the seconds of [0, end) in each.
  enum Window : std::uint8_t { kBurst, kIdle, kOnset, kSettled, kAll };
  const std::vector<Window> windows =
      hasWindows() ? std::vector<Window>{kBurst, kIdle, kOnset, kSettled, kAll}
                   : std::vector<Window>{kAll};
  auto in = [&](Window w, Nanos t) {
    switch (w) {
      case kBurst:
        return burstAt(t);
      case kIdle:
        return !burstAt(t);
      case kOnset:
        return onsetAt(t);
      case kSettled:
        return burstAt(t) && !onsetAt(t);
      case kAll:
        break;
    }
    return true;
  };
  const std::size_t nw = windows.size();
  std::vector<double> windowSeconds(nw, 0.0);
  {
    const Nanos ms = fromMs(1.0);
    std::vector<Nanos> covered(nw, 0);
    for (Nanos t = 0; t < end_; t += ms) {
      for (std::size_t w = 0; w < nw; ++w) covered[w] += in(windows[w], t) ? ms : 0;
    }
    for (std::size_t w = 0; w < nw; ++w) {
      windowSeconds[w] = windows[w] == kAll ? toSeconds(end_) : toSeconds(covered[w]);
    }
    if (nw > 1) windowSeconds[kIdle] = toSeconds(end_ - covered[kBurst]);
  }
  static constexpr const char* kNames[] = {"burst", "idle", "onset", "settled", "all"};

  for (std::size_t c = 0; c < s_.classes.size(); ++c) {
    ClassResult cr;
    cr.name = s_.classes[c].name;
    cr.priority = s_.classes[c].priority;
    std::vector<std::vector<double>> queue(nw), wait(nw), ttft(nw);
    std::vector<std::size_t> arrived(nw, 0), done(nw, 0), rejected(nw, 0), evicted(nw, 0),
        unfinished(nw, 0), tooLarge(nw, 0);
    std::vector<double> tokens(nw, 0.0);
    for (const Request& r : requests_) {
      if (r.cls != c) continue;
      if (r.state == State::kDone && r.finished < end_) {
        for (std::size_t w = 0; w < nw; ++w) {
          if (!in(windows[w], r.finished)) continue;
          ++done[w];
          tokens[w] += static_cast<double>(r.output);
        }
      }
      if (r.arrival >= end_) continue;
      ++cr.arrived;
      cr.preemptions += r.preemptions;
      cr.recomputedTokens += static_cast<std::uint64_t>(r.recomputedTokens);
      if (r.state == State::kDone) {
        cr.generatedTokens += static_cast<std::uint64_t>(r.output);
      } else if (r.firstToken >= 0 && r.firstToken <= now_) {
        cr.generatedTokens += static_cast<std::uint64_t>(r.generated);
      }
      switch (r.state) {
        case State::kDone:
          ++cr.completed;
          break;
        case State::kRejected:
          ++cr.rejected;
          break;
        case State::kEvicted:
          ++cr.evicted;
          break;
        case State::kTooLarge:
          ++cr.tooLarge;
          break;
        case State::kRevoked:
          ++cr.revoked;
          cr.wastedTokens += static_cast<std::uint64_t>(r.firstToken >= 0 ? r.generated : 0);
          cr.repaidPrefillTokens += static_cast<std::uint64_t>(r.admitted >= 0 ? r.input : 0);
          break;
        default:
          ++cr.unfinished;
          break;
      }
      for (std::size_t w = 0; w < nw; ++w) {
        if (!in(windows[w], r.arrival)) continue;
        ++arrived[w];
        rejected[w] += r.state == State::kRejected ? 1 : 0;
        evicted[w] += r.state == State::kEvicted ? 1 : 0;
        unfinished[w] += unfinishedState(r.state) ? 1 : 0;
        tooLarge[w] += r.state == State::kTooLarge ? 1 : 0;
        if (r.dispatched >= 0) {
          queue[w].push_back(static_cast<double>(r.dispatched - r.arrival) / 1e6);
        }
        if (r.admitted >= 0) {
          wait[w].push_back(static_cast<double>(r.admitted - r.dispatched) / 1e6);
        }
        if (r.firstToken >= 0 && r.firstToken <= now_) {
          ttft[w].push_back(static_cast<double>(r.firstToken - r.arrival) / 1e6);
        }
      }
    }
    for (std::size_t w = 0; w < nw; ++w) {
      WindowStats ws;
      ws.window = kNames[windows[w]];
      ws.arrived = arrived[w];
      ws.rejected = rejected[w];
      ws.evicted = evicted[w];
      ws.unfinished = unfinished[w];
      ws.tooLarge = tooLarge[w];
      ws.queueMs = percentiles(queue[w]);
      ws.serverWaitMs = percentiles(wait[w]);
      ws.ttftMs = percentiles(ttft[w]);
      ws.completedPerSecond = static_cast<double>(done[w]) / windowSeconds[w];
      ws.outputTokensPerSecond = tokens[w] / windowSeconds[w];
      cr.windows.push_back(std::move(ws));
    }
    cr.minutes = minuteWindows(c);
    out.classes.push_back(std::move(cr));
  }
  if (options_.collectSeries) {
    auto sec = [](Nanos t) { return t < 0 ? kNoValue : toSeconds(t); };
    for (const Request& r : requests_) {
      RequestRecord rec;
      rec.classIndex = r.cls;
      rec.endpoint = r.endpoint;
      rec.gateway = r.gateway;
      rec.inputTokens = r.input;
      rec.outputTokens = r.output;
      rec.arrival = sec(r.arrival);
      rec.dispatched = sec(r.dispatched);
      rec.admitted = sec(r.admitted);
      rec.firstToken = r.firstToken <= now_ ? sec(r.firstToken) : kNoValue;
      rec.finished =
          r.state == State::kDone || r.state == State::kRevoked ? sec(r.finished) : kNoValue;
      rec.retryOf = r.retryOf;
      rec.preemptions = r.preemptions;
      rec.outcome = r.state == State::kDone       ? "completed"
                    : r.state == State::kRejected ? "rejected"
                    : r.state == State::kEvicted  ? "evicted"
                    : r.state == State::kRevoked  ? "revoked"
                    : r.state == State::kTooLarge ? "too-large"
                                                  : "unfinished";
      out.requests.push_back(std::move(rec));
    }
    out.samples = std::move(samples_);
  }
  return out;
}

ArmResult Simulation::collectRecords(const std::vector<RequestRecord>& records) {
  auto ns = [](double seconds) { return std::isnan(seconds) ? Nanos{-1} : fromSeconds(seconds); };
  requests_.clear();
  now_ = end_;
  for (const RequestRecord& rec : records) {
    Request r;
    r.cls = rec.classIndex;
    r.endpoint = rec.endpoint;
    r.gateway = rec.gateway;
    r.input = rec.inputTokens;
    r.output = rec.outputTokens;
    r.arrival = ns(rec.arrival);
    r.dispatched = ns(rec.dispatched);
    r.firstToken = ns(rec.firstToken);
    r.finished = ns(rec.finished);
    r.retryOf = rec.retryOf;
    r.generated = r.firstToken >= 0 ? rec.outputTokens : 0;
    r.state = rec.outcome == "completed"   ? State::kDone
              : rec.outcome == "rejected"  ? State::kRejected
              : rec.outcome == "evicted"   ? State::kEvicted
              : rec.outcome == "revoked"   ? State::kRevoked
              : rec.outcome == "too-large" ? State::kTooLarge
                                           : State::kRunning;
    now_ = std::max({now_, r.firstToken, r.finished});
    requests_.push_back(r);
  }
  return collect();
}

}  // namespace detail

std::optional<std::size_t> worstMinute(const ClassResult& c) {
  std::optional<std::size_t> worst;
  for (std::size_t m = 0; m < c.minutes.size(); ++m) {
    const double p99 = c.minutes[m].ttftMs.p99;
    if (std::isnan(p99)) continue;
    if (!worst || p99 > c.minutes[*worst].ttftMs.p99) worst = m;
  }
  return worst;
}

ArmResult measureRecords(const Scenario& scenario, const Arm& arm,
                         const std::vector<RequestRecord>& records) {
  detail::Simulation sim(scenario, arm, RunOptions{});
  return sim.collectRecords(records);
}

double erlangCMeanWait(double lambda, double mu, int c) {
  const double a = lambda / mu;
  const double rho = a / c;
  if (!(rho < 1.0)) return std::numeric_limits<double>::infinity();
  double term = 1.0;  // a^k / k!
  double sum = 0.0;
  for (int k = 0; k < c; ++k) {
    sum += term;
    term *= a / (k + 1);
  }
  const double top = term / (1.0 - rho);  // a^c / c! / (1 - rho)
  const double probWait = top / (sum + top);
  return probWait / (c * mu - lambda);
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
