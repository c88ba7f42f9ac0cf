#include "pool.hpp"

#include <tuple>

namespace holdback::gateway {

Pool::Pool(std::vector<std::string> urls, std::vector<HostPort> hosts, bool scrapeLagCredit)
    : lag_credit_(scrapeLagCredit) {
  for (std::size_t i = 0; i < urls.size(); ++i) {
    auto s = std::make_unique<State>();
    s->url = std::move(urls[i]);
    s->host = std::move(hosts[i]);
    states_.push_back(std::move(s));
  }
  view_.resize(states_.size());
  for (std::size_t i = 0; i < states_.size(); ++i) view_[i].name = states_[i]->url;
  pick_view_ = view_;
  pick_indices_.resize(states_.size());
  pick_up_.resize(states_.size());
}

double Pool::scrapeLagCredit(const State& s) const {
  const std::uint64_t dispatches = s.dispatches.load(std::memory_order_relaxed);
  return lag_credit_ && dispatches > s.dispatchesAtScrape
             ? double(dispatches - s.dispatchesAtScrape)
             : 0.0;
}

void Pool::fill(Endpoint& e, const State& s) const {
  e.updateTime = s.updateTime;
  e.waitingQueueSize = s.waiting + scrapeLagCredit(s);
  e.kvCacheUsage = s.kvCacheUsage;
  e.runningRequests = s.running;
  e.inFlightRequests = s.inFlight.load(std::memory_order_relaxed);
}

std::span<const Endpoint> Pool::endpoints(TimePoint) noexcept {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < states_.size(); ++i) fill(view_[i], *states_[i]);
  return view_;
}

void Pool::snapshot(std::vector<Endpoint>& out) const {
  out.resize(states_.size());
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (out[i].name != states_[i]->url) out[i].name = states_[i]->url;
    fill(out[i], *states_[i]);
  }
}

void Pool::recordScrape(std::size_t i, const VllmTelemetry& telemetry, TimePoint at,
                        std::uint64_t dispatchCountBefore, std::size_t skippedLines) {
  std::lock_guard lock(mu_);
  State& s = *states_[i];
  s.waiting = telemetry.waiting;
  s.running = telemetry.running;
  s.kvCacheUsage = telemetry.kvCacheUsage;
  s.updateTime = at;
  s.dispatchesAtScrape = dispatchCountBefore;
  s.up = true;
  ++s.scrapes;
  s.skippedLines += skippedLines;
}

void Pool::recordScrapeFailure(std::size_t i, std::size_t skippedLines) {
  std::lock_guard lock(mu_);
  State& s = *states_[i];
  s.up = false;
  ++s.scrapes;
  ++s.scrapeErrors;
  s.skippedLines += skippedLines;
}

bool Pool::up(std::size_t i) const {
  std::lock_guard lock(mu_);
  return states_[i]->up;
}

bool Pool::anyUp() const {
  std::lock_guard lock(mu_);
  for (const auto& s : states_) {
    if (s->up) return true;
  }
  return false;
}

std::optional<std::size_t> Pool::pick(const SaturationDetector& detector, TimePoint now) {
  if (states_.empty()) return std::nullopt;
  std::lock_guard pick_lock(pick_mu_);
  snapshot(pick_view_);
  std::vector<char>& up = pick_up_;
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < states_.size(); ++i) up[i] = states_[i]->up ? 1 : 0;
  }
  const FilterResult filtered = detector.filter(pick_view_, now, pick_indices_);
  std::size_t kept = filtered.kept;
  if (kept == 0) {  // nothing passed (a detector without fail-open): every endpoint is a candidate
    for (std::size_t i = 0; i < states_.size(); ++i) pick_indices_[i] = i;
    kept = states_.size();
  }
  std::size_t best = pick_indices_[0];
  auto key = [&](std::size_t i) {
    return std::make_tuple(!up[i], pick_view_[i].inFlightRequests, pick_view_[i].waitingQueueSize,
                           i);
  };
  for (std::size_t k = 1; k < kept; ++k) {
    if (key(pick_indices_[k]) < key(best)) best = pick_indices_[k];
  }
  states_[best]->inFlight.fetch_add(1, std::memory_order_relaxed);
  states_[best]->dispatches.fetch_add(1, std::memory_order_relaxed);
  return best;
}

void Pool::release(std::size_t i) noexcept {
  states_[i]->inFlight.fetch_sub(1, std::memory_order_relaxed);
}

Pool::Counters Pool::counters(std::size_t i) const {
  std::lock_guard lock(mu_);
  const State& s = *states_[i];
  return {s.scrapes, s.scrapeErrors, s.skippedLines, s.dispatches.load(std::memory_order_relaxed),
          s.up,      s.updateTime};
}

}  // namespace holdback::gateway
