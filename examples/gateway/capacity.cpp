#include "capacity.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "holdback/core/text.hpp"

namespace holdback::gateway {

std::string_view toString(SlotSource source) noexcept {
  switch (source) {
    case SlotSource::kEndpointSetting:
      return "endpoint";
    case SlotSource::kPoolSetting:
      return "pool";
    case SlotSource::kMetric:
      return "metric";
    case SlotSource::kConfig:
      return "config";
    case SlotSource::kEstimate:
      return "estimate";
  }
  return "estimate";
}

std::string_view toString(KvSource source) noexcept {
  switch (source) {
    case KvSource::kNotScraped:
      return "not-scraped";
    case KvSource::kCacheConfigInfo:
      return "cache_config_info";
    case KvSource::kMetric:
      return "metric";
    case KvSource::kAbsent:
      return "absent";
    case KvSource::kInvalid:
      return "invalid";
  }
  return "not-scraped";
}

CapacityLearner::CapacityLearner(std::vector<std::string> names,
                                 const std::vector<SlotSettings>& settings, Log log,
                                 std::int64_t probeReserve)
    : log_(std::move(log)), probe_reserve_(std::max<std::int64_t>(0, probeReserve)) {
  states_.resize(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    State& s = states_[i];
    s.name = std::move(names[i]);
    const SlotSettings set = i < settings.size() ? settings[i] : SlotSettings{};
    if (set.endpoint > 0) {
      s.now.slots = set.endpoint;
      s.now.slotSource = SlotSource::kEndpointSetting;
    } else if (set.pool > 0) {
      s.now.slots = set.pool;
      s.now.slotSource = SlotSource::kPoolSetting;
    } else if (set.config > 0) {
      s.now.slots = set.config;
      s.now.slotSource = SlotSource::kConfig;
    }
    if (log_) {
      log_(s.now.slotSource == SlotSource::kEstimate
               ? s.name +
                     ": slots not configured: estimated from the scrapes (the most requests "
                     "one showed running)"
               : s.name + ": " + std::to_string(s.now.slots) + " slots (" +
                     std::string(toString(s.now.slotSource)) + " setting)");
    }
  }
}

std::int64_t CapacityLearner::counted(std::int64_t slots) const {
  return slots > 0 ? std::max(slots, probe_reserve_ + 1) : 0;
}

EndpointCapacity CapacityLearner::initial(std::size_t i) const {
  std::lock_guard lock(mu_);
  const LearnedCapacity& c = states_[i].now;
  return {.maxRunningRequests = counted(c.slots), .kvCapacityTokens = c.kvCapacityTokens};
}

namespace {

// A reported count as an integer in [1, max] (a fraction rounded down), or nullopt.
std::optional<std::int64_t> reportedCount(std::optional<double> value, std::int64_t max) {
  if (!value || !std::isfinite(*value) || *value < 1.0 || *value > double(max)) return std::nullopt;
  return static_cast<std::int64_t>(std::floor(*value));
}

}  // namespace

std::optional<EndpointCapacity> CapacityLearner::observe(std::size_t i, const CacheConfigInfo& info,
                                                         double running, double waiting,
                                                         const Reported& reported) {
  std::vector<std::string> lines;
  std::optional<EndpointCapacity> install;
  {
    std::lock_guard lock(mu_);
    State& s = states_[i];
    LearnedCapacity& c = s.now;
    const std::int64_t slots_before = c.slots;
    // The engine's slot gauge, unless a setting names the count.
    if (c.slotSource == SlotSource::kMetric || c.slotSource == SlotSource::kEstimate) {
      const auto gauge = reportedCount(reported.slots, DispatchLedger::kMaxConfiguredSlots);
      if (gauge) {
        if (c.slotSource != SlotSource::kMetric || c.slots != *gauge) {
          lines.push_back(s.name + ": " + std::to_string(*gauge) +
                          " slots (the engine's slot gauge)");
        }
        c.slotSource = SlotSource::kMetric;
        c.slots = *gauge;
      } else if (c.slotSource == SlotSource::kMetric) {
        lines.push_back(s.name + ": the engine's slot gauge is gone or not a count in [1, " +
                        std::to_string(DispatchLedger::kMaxConfiguredSlots) +
                        "]: slots estimated from the scrapes again");
        c.slotSource = SlotSource::kEstimate;
        c.slots = estimatedSlots(s);
      }
    }
    if (c.slotSource == SlotSource::kEstimate && std::isfinite(running) && running >= 0.0) {
      const auto shown = static_cast<std::int64_t>(
          std::min(std::floor(running), double(DispatchLedger::kMaxObservedSlots)));
      if (shown > s.mostRunning) {
        s.mostRunning = shown;
        s.confirmed = false;
        lines.push_back(s.name + ": at least " + std::to_string(shown) +
                        " slots (estimate: the most requests a scrape showed running)");
      }
      if (!s.confirmed && s.mostRunning > 0 && shown >= s.mostRunning && std::isfinite(waiting) &&
          waiting >= 0.5) {
        s.confirmed = true;
        lines.push_back(s.name + ": " + std::to_string(s.mostRunning) +
                        " slots (estimate: a scrape showed a queue at that many running)");
      }
      c.slots = estimatedSlots(s);
    }
    KvSource source = info.status == CacheConfigInfo::Status::kValid    ? KvSource::kCacheConfigInfo
                      : info.status == CacheConfigInfo::Status::kAbsent ? KvSource::kAbsent
                                                                        : KvSource::kInvalid;
    std::int64_t tokens = source == KvSource::kCacheConfigInfo ? info.kvCapacityTokens : 0;
    std::string problem = info.problem;
    if (source == KvSource::kAbsent && reported.kvCapacityTokens) {
      // No cache_config_info: the engine's own KV-capacity gauge (SGLang).
      if (const auto gauge =
              reportedCount(reported.kvCapacityTokens, CacheConfigInfo::kMaxKvCapacityTokens)) {
        source = KvSource::kMetric;
        tokens = *gauge;
      } else {
        source = KvSource::kInvalid;
        problem = "the engine's KV-capacity gauge reads " +
                  formatNumber(*reported.kvCapacityTokens) + "; expected a token count in [1, " +
                  std::to_string(CacheConfigInfo::kMaxKvCapacityTokens) + "]";
      }
    }
    if (source == KvSource::kCacheConfigInfo &&
        (c.kvSource != source || c.kvCapacityTokens != tokens)) {
      lines.push_back(s.name + ": KV cache " + std::to_string(tokens) +
                      " tokens (vllm:cache_config_info: " + std::to_string(info.numGpuBlocks) +
                      " blocks x " + std::to_string(info.blockSize) + ")");
    } else if (source == KvSource::kMetric &&
               (c.kvSource != source || c.kvCapacityTokens != tokens)) {
      lines.push_back(s.name + ": KV cache " + std::to_string(tokens) +
                      " tokens (the engine's KV-capacity gauge)");
    } else if (source == KvSource::kAbsent && c.kvSource != source) {
      lines.push_back(s.name +
                      ": no vllm:cache_config_info: KV capacity unknown (the KV term reads "
                      "vllm:kv_cache_usage_perc alone)");
    } else if (source == KvSource::kInvalid && (c.kvSource != source || s.problem != problem)) {
      lines.push_back(s.name + ": " + problem +
                      ": KV capacity unknown (the KV term reads the KV usage gauge alone)");
      s.problem = problem;
    }
    if (tokens != c.kvCapacityTokens || c.slots != slots_before) {
      install =
          EndpointCapacity{.maxRunningRequests = counted(c.slots), .kvCapacityTokens = tokens};
    }
    c.kvCapacityTokens = tokens;
    c.kvSource = source;
  }
  if (log_) {
    for (const std::string& line : lines) log_(line);
  }
  return install;
}

std::int64_t CapacityLearner::estimatedSlots(const State& s) const {
  // Until a queue confirms it, one slot beyond what was shown (and beyond the reserve's): the
  // probe that lets the estimate grow (a reserve counted in slots would otherwise never dispatch
  // past it).
  return s.confirmed ? s.mostRunning : s.mostRunning + 1 + probe_reserve_;
}

LearnedCapacity CapacityLearner::learned(std::size_t i) const {
  std::lock_guard lock(mu_);
  const State& s = states_[i];
  LearnedCapacity out = s.now;
  out.bookingSlots = counted(out.slots);
  return out;
}

}  // namespace holdback::gateway
