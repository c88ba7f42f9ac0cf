// Implementation of holdback/flow/plugins/program_aware_fairness.hpp: compiled into libholdback by
// src/flow.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY). The
// band index and the pick are in program_aware_fairness_index-inl.hpp (included here).
#pragma once

#include "holdback/flow/plugins/program_aware_fairness.hpp"

#include "holdback/flow/detail/program_aware_fairness_fields.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "holdback/core/text.hpp"
#include "holdback/flow/plugins/program_aware_fairness_index-inl.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// Above this exponent the epoch moves forward (2^512 is far from double overflow).
inline constexpr double kProgramRebaseExponent = 512.0;

// A JSON string; ill-formed UTF-8 (a host's program id from a client header) becomes U+FFFD, so
// the state is always valid JSON.
HOLDBACK_INLINE void appendJsonString(std::string& out, std::string_view text) {
  std::string valid;
  if (!isValidUtf8(text)) {
    valid = toValidUtf8(text);
    text = valid;
  }
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
  checkFields<ProgramAwareFairnessOptions>(kProgramAwareFairnessFields, o, path, diagnostics);
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

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::decayExponent(TimePoint t) const noexcept {
  if (options_.halfLife <= Duration::zero()) return 0.0;
  return detail::secondsOf(t - epoch_) / detail::secondsOf(options_.halfLife);
}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::Program* ProgramAwareFairnessPolicy::resolveLocked(
    FlowEntry& e, TimePoint seen) const noexcept {
  if (e.program != nullptr && e.generation == evictions_) return e.program;
  e.program = nullptr;
  e.generation = evictions_;
  if (const auto it = programs_.find(e.id); it != programs_.end()) {
    e.program = &it->second;
  } else {
    // A program queued before it was ever reported: its entry (service 0) is made now, once,
    // so that its reports re-key this flow. Only an allocation failure leaves it out (the flow
    // then stays at service 0 until it is empty again).
    HOLDBACK_TRY {
      Program fresh;
      fresh.lastUpdate = seen;
      e.program = &programs_.emplace(std::string(e.id), fresh).first->second;
    }
    HOLDBACK_CATCH_ALL {
      e.program = nullptr;
    }
  }
  return e.program;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::recordServed(
    std::string_view flowId, std::uint64_t inputTokens, std::uint64_t outputTokens, TimePoint now,
    std::optional<Duration> queueWait) const {
  const double tokens = double(inputTokens) + kOutputTokenWeight * double(outputTokens);
  MutexLock lock(mu_);
  const double exponent = prepareEpochLocked(now);
  // Forget programs not reported for evictionTtl and with nothing queued (at most once per
  // evictionSweep).
  if (options_.evictionTtl > Duration::zero() && now - last_sweep_ >= options_.evictionSweep) {
    last_sweep_ = now;
    bool forgot = false;
    for (auto it = programs_.begin(); it != programs_.end();) {
      if (it->second.flows == nullptr && now - it->second.lastUpdate >= options_.evictionTtl) {
        it = programs_.erase(it);
        forgot = true;
      } else {
        ++it;
      }
    }
    if (forgot) ++evictions_;
  }
  auto it = programs_.find(flowId);
  if (it == programs_.end()) it = programs_.emplace(std::string(flowId), Program{}).first;
  Program& p = it->second;
  p.scaledService += tokens * std::exp2(exponent);
  if (!std::isfinite(p.scaledService)) p.scaledService = 0.0;
  p.lastUpdate = std::max(p.lastUpdate, now);
  rekeyLocked(p);
  ++p.requests;
  if (queueWait && *queueWait >= Duration::zero()) {
    p.waitSeconds += detail::secondsOf(*queueWait);
    ++p.waits;
  }
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::prepareEpochLocked(
    TimePoint now) const noexcept {
  if (!has_epoch_) {
    epoch_ = now;
    last_sweep_ = now;
    has_epoch_ = true;
  }
  const double exponent = decayExponent(now);
  if (exponent <= detail::kProgramRebaseExponent) return exponent;
  // Move the epoch to `now`: every stored value shrinks by the same factor.
  // The indexes are re-keyed as a whole (rescaling in place could merge keys that underflow
  // and break their order): take every indexed flow out, then put it back.
  const double factor = std::exp2(-exponent);
  for (auto& [id, p] : programs_) {
    p.scaledService *= factor;
    for (FlowEntry* e = p.flows; e != nullptr; e = e->next) {
      e->band->root = BandIndex::erase(e->band->root, e);
    }
  }
  for (auto& [id, p] : programs_) {
    for (FlowEntry* e = p.flows; e != nullptr; e = e->next) {
      e->service = p.scaledService;
      e->band->root = BandIndex::insert(e->band->root, e);
    }
  }
  epoch_ = now;
  return 0.0;
}

HOLDBACK_INLINE void ProgramAwareFairnessPolicy::inheritState(const FairnessPolicy& previous,
                                                              TimePoint now) const {
  const auto* prev = dynamic_cast<const ProgramAwareFairnessPolicy*>(&previous);
  if (prev == nullptr || prev == this) return;
  struct Carried {
    std::string id;
    double service = 0.0;  // decayed to `now` under prev's half-life
    TimePoint lastUpdate{};
    std::uint64_t requests = 0;
    double waitSeconds = 0.0;
    std::uint64_t waits = 0;
  };
  std::vector<Carried> carried;
  {
    MutexLock lock(prev->mu_);
    carried.reserve(prev->programs_.size());
    // A clock behind prev's epoch (a host's clock stepped back) decays nothing.
    const double decay =
        prev->has_epoch_ ? std::exp2(-std::max(0.0, prev->decayExponent(now))) : 1.0;
    for (const auto& [id, p] : prev->programs_) {
      double service = p.scaledService * decay;
      if (!std::isfinite(service) || service < 0.0) service = 0.0;
      carried.push_back({id, service, p.lastUpdate, p.requests, p.waitSeconds, p.waits});
    }
  }
  if (carried.empty()) return;
  MutexLock lock(mu_);
  const double exponent = prepareEpochLocked(now);
  const double scale = std::exp2(exponent);  // service at `now` -> scaled to this epoch
  for (Carried& c : carried) {
    auto it = programs_.find(c.id);
    if (it == programs_.end()) it = programs_.emplace(std::move(c.id), Program{}).first;
    Program& p = it->second;
    p.scaledService += c.service * scale;
    if (!std::isfinite(p.scaledService)) p.scaledService = 0.0;
    p.lastUpdate = std::max(p.lastUpdate, c.lastUpdate);
    p.requests += c.requests;
    p.waitSeconds += c.waitSeconds;
    p.waits += c.waits;
    rekeyLocked(p);
  }
}

HOLDBACK_INLINE double ProgramAwareFairnessPolicy::attainedService(std::string_view flowId,
                                                                   TimePoint now) const {
  MutexLock lock(mu_);
  const auto it = programs_.find(flowId);
  if (it == programs_.end()) return 0.0;
  return it->second.scaledService * std::exp2(-decayExponent(now));
}

HOLDBACK_INLINE ProgramAwareFairnessPolicy::PickCounts ProgramAwareFairnessPolicy::pickCounts()
    const {
  MutexLock lock(mu_);
  return pick_counts_;
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
    std::size_t queued_flows = 0;
    for (const FlowEntry* e = p.flows; e != nullptr; e = e->next) ++queued_flows;
    out += ", \"nonEmptyFlows\": " + std::to_string(queued_flows);
    out += "}";
  }
  out += "], \"jainFairnessIndex\": " + formatNumber(jainLocked());
  out += ", \"picks\": " + std::to_string(pick_counts_.picks);
  out += ", \"picksStoppedAtLimit\": " + std::to_string(pick_counts_.stoppedAtLimit) + "}";
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback