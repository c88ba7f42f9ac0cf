// Implementation of holdback/flow/program_aware_fairness.hpp: compiled into libholdback by
// src/flow.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/flow/program_aware_fairness.hpp"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "holdback/core/text.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// A candidate of one pick: the flow, its (epoch-scaled) service, its head's enqueue time.
struct ProgramCandidate {
  const FlowQueueView* flow = nullptr;
  double service = 0.0;
  TimePoint headEnqueue{};
};

struct ProgramAwareState final : FairnessState {
  std::vector<ProgramCandidate> scratch;  // capacity only grows: steady state does not allocate
};

// Above this exponent the epoch moves forward (2^512 is far from double overflow).
inline constexpr double kProgramRebaseExponent = 512.0;

HOLDBACK_INLINE double secondsOf(Duration d) noexcept {
  return std::chrono::duration<double>(d).count();
}

HOLDBACK_INLINE void appendJsonString(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", u);
      out += buffer;
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace detail

HOLDBACK_INLINE ProgramAwareFairnessPolicy::ProgramAwareFairnessPolicy(
    ProgramAwareFairnessOptions options, std::string name)
    : options_(std::move(options)), name_(std::move(name)) {}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::~ProgramAwareFairnessPolicy() = default;

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::validate(const ProgramAwareFairnessOptions& o,
                                                          const std::string& path,
                                                          Diagnostics& diagnostics) {
  if (o.strategy != "las") {
    diagnostics.error(joinPath(path, "strategy"),
                      "\"" + o.strategy + "\" is not a known strategy; allowed: las");
  }
  const auto weight = [&](std::string_view key, double v) {
    if (!std::isfinite(v) || v < 0.0) {
      diagnostics.error(joinPath(path, key), formatNumber(v) + " must be a finite number >= 0");
    }
  };
  weight("lasWeightService", o.weightService);
  weight("lasWeightHeadWait", o.weightHeadWait);
  if (o.halfLife < Duration::zero()) {
    diagnostics.error(joinPath(path, "lasHalfLifeSeconds"),
                      formatDuration(o.halfLife) + " must be >= 0 (0 = no decay)");
  }
  if (o.evictionTtl < Duration::zero()) {
    diagnostics.error(joinPath(path, "evictionTtlSeconds"),
                      formatDuration(o.evictionTtl) + " must be >= 0 (0 = never evict)");
  }
  if (o.evictionSweep <= Duration::zero()) {
    diagnostics.error(joinPath(path, "evictionSweepSeconds"),
                      formatDuration(o.evictionSweep) + " must be > 0");
  }
}

HOLDBACK_INLINE Result<std::unique_ptr<ProgramAwareFairnessPolicy>>
ProgramAwareFairnessPolicy::create(ProgramAwareFairnessOptions options, std::string name) {
  Diagnostics diagnostics;
  validate(options, "", diagnostics);
  return makeIfValid<std::unique_ptr<ProgramAwareFairnessPolicy>>(std::move(diagnostics), [&] {
    return std::unique_ptr<ProgramAwareFairnessPolicy>(
        new ProgramAwareFairnessPolicy(std::move(options), std::move(name)));
  });
}

HOLDBACK_INLINE std::unique_ptr<FairnessState> ProgramAwareFairnessPolicy::newState() const {
  auto state = std::make_unique<detail::ProgramAwareState>();
  state->scratch.reserve(64);
  return state;
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::decayExponent(TimePoint t) const noexcept {
  if (options_.halfLife <= Duration::zero()) return 0.0;
  return detail::secondsOf(t - epoch_) / detail::secondsOf(options_.halfLife);
}

HOLDBACK_INLINE const FlowQueueView* ProgramAwareFairnessPolicy::pick(
    const BandView& band, FairnessState* state) const noexcept {
  auto* s = dynamic_cast<detail::ProgramAwareState*>(state);
  if (s == nullptr) return band.bestHeadFlow();  // no scratch: degrade to global-strict
  s->scratch.clear();
  double min_service = 0.0;
  double max_service = 0.0;
  TimePoint min_enqueue = TimePoint::max();
  TimePoint max_enqueue = TimePoint::min();
  {
    MutexLock lock(mu_);
    for (const FlowQueueView* f = band.firstActiveFlow(); f != nullptr;
         f = band.nextActiveFlowAfter(f->flowId())) {
      const QueuedRequestView* head = f->head();
      if (head == nullptr) continue;  // tolerated: the index may be briefly stale
      double service = 0.0;
      if (const auto it = programs_.find(f->flowId()); it != programs_.end()) {
        service = it->second.scaledService;
      }
      HOLDBACK_TRY {
        s->scratch.push_back({f, service, head->enqueueTime});
      }
      HOLDBACK_CATCH_ALL {
        return band.bestHeadFlow();
      }
      if (s->scratch.size() == 1) {
        min_service = max_service = service;
      } else {
        min_service = std::min(min_service, service);
        max_service = std::max(max_service, service);
      }
      min_enqueue = std::min(min_enqueue, head->enqueueTime);
      max_enqueue = std::max(max_enqueue, head->enqueueTime);
    }
  }
  if (s->scratch.empty()) return nullptr;
  const double service_range = max_service - min_service;
  const double wait_range = detail::secondsOf(max_enqueue - min_enqueue);
  const FlowQueueView* best = nullptr;
  double best_score = 0.0;
  for (const detail::ProgramCandidate& c : s->scratch) {
    // wait_i - min wait = max enqueue - enqueue_i: `now` cancels out.
    const double norm_service =
        service_range > 0.0 ? (c.service - min_service) / service_range : 0.5;
    const double norm_wait =
        wait_range > 0.0 ? detail::secondsOf(max_enqueue - c.headEnqueue) / wait_range : 0.5;
    const double score =
        options_.weightService * (1.0 - norm_service) + options_.weightHeadWait * norm_wait;
    if (best == nullptr || score > best_score) {
      best = c.flow;
      best_score = score;
    }
  }
  return best;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::recordServed(
    std::string_view flowId, std::uint64_t inputTokens, std::uint64_t outputTokens, TimePoint now,
    std::optional<Duration> queueWait) const {
  const double tokens = double(inputTokens) + kOutputTokenWeight * double(outputTokens);
  MutexLock lock(mu_);
  if (!has_epoch_) {
    epoch_ = now;
    last_sweep_ = now;
    has_epoch_ = true;
  }
  double exponent = decayExponent(now);
  if (exponent > detail::kProgramRebaseExponent) {
    // Move the epoch to `now`: every stored value shrinks by the same factor.
    const double factor = std::exp2(-exponent);
    for (auto& [id, p] : programs_) p.scaledService *= factor;
    epoch_ = now;
    exponent = 0.0;
  }
  // Forget programs not reported for evictionTtl (at most once per evictionSweep).
  if (options_.evictionTtl > Duration::zero() && now - last_sweep_ >= options_.evictionSweep) {
    last_sweep_ = now;
    for (auto it = programs_.begin(); it != programs_.end();) {
      it = now - it->second.lastUpdate >= options_.evictionTtl ? programs_.erase(it) : ++it;
    }
  }
  auto it = programs_.find(flowId);
  if (it == programs_.end()) it = programs_.emplace(std::string(flowId), Program{}).first;
  Program& p = it->second;
  p.scaledService += tokens * std::exp2(exponent);
  if (!std::isfinite(p.scaledService)) p.scaledService = 0.0;
  p.lastUpdate = std::max(p.lastUpdate, now);
  ++p.requests;
  if (queueWait && *queueWait >= Duration::zero()) {
    p.waitSeconds += detail::secondsOf(*queueWait);
    ++p.waits;
  }
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::attainedService(std::string_view flowId,
                                                                   TimePoint now) const {
  MutexLock lock(mu_);
  const auto it = programs_.find(flowId);
  if (it == programs_.end()) return 0.0;
  return it->second.scaledService * std::exp2(-decayExponent(now));
}

HOLDBACK_INLINE std::size_t ProgramAwareFairnessPolicy::programCount() const {
  MutexLock lock(mu_);
  return programs_.size();
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::jainLocked() const {
  double sum = 0.0;
  double sum_sq = 0.0;
  std::size_t n = 0;
  for (const auto& [id, p] : programs_) {
    if (p.waits == 0) continue;
    const double mean = p.waitSeconds / double(p.waits);
    sum += mean;
    sum_sq += mean * mean;
    ++n;
  }
  if (n <= 1 || sum_sq <= 0.0) return 1.0;
  return sum * sum / (double(n) * sum_sq);
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::jainFairnessIndex() const {
  MutexLock lock(mu_);
  return jainLocked();
}

HOLDBACK_INLINE std::string ProgramAwareFairnessPolicy::dumpState(TimePoint now) const {
  MutexLock lock(mu_);
  std::string out = "{\"type\": ";
  detail::appendJsonString(out, kType);
  out += ", \"name\": ";
  detail::appendJsonString(out, name_);
  out += ", \"parameters\": {\"strategy\": ";
  detail::appendJsonString(out, options_.strategy);
  out += ", \"lasWeightService\": " + formatNumber(options_.weightService);
  out += ", \"lasWeightHeadWait\": " + formatNumber(options_.weightHeadWait);
  out += ", \"lasHalfLifeSeconds\": " + formatNumber(detail::secondsOf(options_.halfLife));
  out += ", \"evictionTtlSeconds\": " + formatNumber(detail::secondsOf(options_.evictionTtl));
  out += ", \"evictionSweepSeconds\": " + formatNumber(detail::secondsOf(options_.evictionSweep));
  out += "}, \"programs\": [";
  const double decay = std::exp2(-decayExponent(now));
  bool first = true;
  for (const auto& [id, p] : programs_) {
    out += first ? "" : ", ";
    first = false;
    out += "{\"id\": ";
    detail::appendJsonString(out, id);
    out += ", \"attainedService\": " + formatNumber(p.scaledService * decay);
    out += ", \"requests\": " + std::to_string(p.requests);
    out += ", \"meanQueueWaitSeconds\": " +
           (p.waits == 0 ? std::string("null") : formatNumber(p.waitSeconds / double(p.waits)));
    out += ", \"secondsSinceLastReport\": " + formatNumber(detail::secondsOf(now - p.lastUpdate));
    out += "}";
  }
  out += "], \"jainFairnessIndex\": " + formatNumber(jainLocked()) + "}";
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
