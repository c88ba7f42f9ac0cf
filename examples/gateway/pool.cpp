#include "pool.hpp"

#include "replica_feed.hpp"
#include "replica_reserve.hpp"

namespace holdback::gateway {

namespace {

std::vector<SlotSettings> slotSettings(std::vector<SlotSettings> slots, std::size_t n,
                                       const EndpointCapacity& capacity) {
  slots.resize(n);
  for (SlotSettings& s : slots) {
    if (s.config <= 0) s.config = capacity.maxRunningRequests;
  }
  return slots;
}

}  // namespace

Pool::Pool(std::vector<std::string> urls, std::vector<HostPort> hosts, DispatchLedgerOptions ledger,
           EndpointCapacity capacity, std::vector<SlotSettings> slots, CapacityLearner::Log log,
           std::int64_t probeReserve, bool priorityRouting)
    : capacity_(urls, slotSettings(std::move(slots), urls.size(), capacity), std::move(log),
                probeReserve),
      ledger_(std::move(ledger)),
      picker_(urls.size(), {.fitFirst = true, .priorityRouting = priorityRouting}) {
  for (std::size_t i = 0; i < urls.size(); ++i) {
    auto s = std::make_unique<State>();
    s->url = std::move(urls[i]);
    s->host = std::move(hosts[i]);
    EndpointCapacity c = capacity_.initial(i);
    c.kvCapacityTokens = capacity.kvCapacityTokens;
    ids_.push_back(ledger_.registerEndpoint(s->url, c));
    states_.push_back(std::move(s));
  }
  view_.resize(states_.size());
  for (std::size_t i = 0; i < states_.size(); ++i) view_[i].name = states_[i]->url;
  pick_view_ = view_;
  pick_up_.resize(states_.size());
  pick_above_.resize(priorityRouting ? states_.size() : 0);
}

std::span<const Endpoint> Pool::endpoints(TimePoint) noexcept {
  ledger_.fill(view_, ids_);
  return view_;
}

void Pool::snapshot(std::vector<Endpoint>& out) const {
  out.resize(states_.size());
  for (std::size_t i = 0; i < states_.size(); ++i) {
    if (out[i].name != states_[i]->url) out[i].name = states_[i]->url;
  }
  ledger_.fill(out, ids_);
}

void Pool::recordScrape(std::size_t i, const VllmTelemetry& telemetry, TimePoint at,
                        const ScrapeMark& mark, std::size_t skippedLines) {
  const Scrape scrape{.updateTime = at,
                      .waitingQueueSize = telemetry.waiting,
                      .runningRequests = telemetry.running,
                      .kvCacheUsage = telemetry.kvCacheUsage};
  (void)ledger_.installScrape(ids_[i], scrape, mark);
  std::lock_guard lock(mu_);
  State& s = *states_[i];
  s.updateTime = at;
  s.up = true;
  ++s.scrapes;
  s.skippedLines += skippedLines;
  s.scraped = {telemetry.running + telemetry.waiting, telemetry.kvCacheUsage};
}

Pool::ScrapedUse Pool::scraped(std::size_t i) const {
  std::lock_guard lock(mu_);
  return states_[i]->scraped;
}

void Pool::recordCapacity(std::size_t i, const CacheConfigInfo& info,
                          const VllmTelemetry& telemetry) {
  const CapacityLearner::Reported reported{.kvCapacityTokens = telemetry.reportedKvCapacityTokens,
                                           .slots = telemetry.reportedSlots};
  if (const auto changed =
          capacity_.observe(i, info, telemetry.running, telemetry.waiting, reported)) {
    (void)ledger_.setCapacity(ids_[i], *changed);
  }
}

LearnedCapacity Pool::capacity(std::size_t i) const {
  return capacity_.learned(i);
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

void Pool::setDialect(std::size_t i, const std::string& dialect) {
  std::lock_guard lock(mu_);
  if (states_[i]->dialect != dialect) states_[i]->dialect = dialect;
}

bool Pool::anyUp() const {
  std::lock_guard lock(mu_);
  for (const auto& s : states_) {
    if (s->up) return true;
  }
  return false;
}

std::optional<Pool::Dispatch> Pool::pick(const SaturationDetector& detector, TimePoint now,
                                         std::int64_t kvTokens, Priority priority) {
  if (states_.empty()) return std::nullopt;
  std::lock_guard pick_lock(pick_mu_);
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < states_.size(); ++i) pick_up_[i] = states_[i]->up ? 1 : 0;
  }
  ledger_.fill(pick_view_, ids_);
  ledger_.inFlightAtOrAbove(ids_, priority, pick_above_);  // empty without priority routing
  const auto best = picker_.pick(pick_view_, detector, now, pick_up_, kvTokens, pick_above_);
  if (!best) return std::nullopt;
  return dispatchTo(*best, kvTokens, priority);
}

Pool::Dispatch Pool::dispatchTo(std::size_t i, std::int64_t kvTokens, Priority priority) {
  states_[i]->dispatches.fetch_add(1, std::memory_order_relaxed);
  ReplicaFeedSink* feed = feed_.load(std::memory_order_acquire);
  if (feed != nullptr) feed->dispatched(i, kvTokens);
  return Dispatch{i,
                  ledger_.dispatch(ids_[i], kvTokens, priority),
                  Dispatch::FeedCompletion(feed, i, kvTokens),
                  {}};
}

void Pool::Dispatch::BookingRelease::send() noexcept {
  if (ReservationSink* sink = std::exchange(sink_, nullptr)) sink->released(booking_);
}

void Pool::Dispatch::FeedCompletion::send() noexcept {
  if (ReplicaFeedSink* sink = std::exchange(sink_, nullptr)) sink->completed(endpoint_, tokens_);
}

Pool::Counters Pool::counters(std::size_t i) const {
  std::lock_guard lock(mu_);
  const State& s = *states_[i];
  return {s.scrapes, s.scrapeErrors, s.skippedLines, s.dispatches.load(std::memory_order_relaxed),
          s.up,      s.updateTime,   s.dialect};
}

}  // namespace holdback::gateway
