// Implementation of holdback/flow/eviction.hpp (compiled by src/flow.cpp, or included by the
// header in header-only mode). The controller's part (trigger, sizing, pacing) is
// detail::Evictor, flow/detail/evictor-inl.hpp.
#pragma once

#include "holdback/flow/eviction.hpp"

#include <string>

#include "holdback/core/text.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE std::string_view toString(LeaseEnd end) noexcept {
  switch (end) {
    case LeaseEnd::kReleased:
      return "released";
    case LeaseEnd::kRevokedConfirmed:
      return "revoked-confirmed";
    case LeaseEnd::kRevokedTimedOut:
      return "revoked-timed-out";
    case LeaseEnd::kReaped:
      return "reaped";
  }
  return "unknown";
}

HOLDBACK_INLINE void validateEvictionOptions(const EvictionOptions& o, std::string_view path,
                                             bool requireEvict, Diagnostics& d) {
  const std::string base(path);
  if (o.maxRevocationsPerDecision < 1 ||
      o.maxRevocationsPerDecision > kMaxRevocationsPerDecisionLimit) {
    d.error(base + "/maxRevocationsPerDecision",
            "must be between 1 and " + std::to_string(kMaxRevocationsPerDecisionLimit) +
                ", but got " + std::to_string(o.maxRevocationsPerDecision));
  }
  if (o.confirmationTimeout <= Duration::zero()) {
    d.error(base + "/confirmationTimeout",
            "must be positive, but got " + formatDuration(o.confirmationTimeout));
  }
  if (o.confirmationGrace < Duration::zero()) {
    d.error(base + "/confirmationGrace",
            "cannot be negative, but got " + formatDuration(o.confirmationGrace));
  }
  if (o.waitForReleases.enabled && o.waitForReleases.tolerance <= Duration::zero()) {
    d.error(base + "/waitForReleases/tolerance",
            "must be positive, but got " + formatDuration(o.waitForReleases.tolerance));
  }
  if (o.restoreReserve.enabled &&
      !(o.restoreReserve.epsilon > 0.0 && o.restoreReserve.epsilon <= 0.5)) {
    d.error(base + "/restoreReserve/epsilon",
            "must be in (0, 0.5], but got " + formatNumber(o.restoreReserve.epsilon));
  }
  if (o.restoreReserve.leadTime < Duration::zero()) {
    d.error(base + "/restoreReserve/leadTime",
            "cannot be negative, but got " + formatDuration(o.restoreReserve.leadTime));
  }
  if (o.restoreReserve.burstMemory < Duration::zero()) {
    d.error(base + "/restoreReserve/burstMemory",
            "cannot be negative, but got " + formatDuration(o.restoreReserve.burstMemory));
  }
  const ReserveRestoreOptions& rr = o.restoreReserve;
  if (!(rr.evictionBudget >= 0.0 && rr.evictionBudget <= 1.0)) {
    d.error(base + "/restoreReserve/evictionBudget",
            formatNumber(rr.evictionBudget) +
                " is outside [0, 1] (revocations per protected request started; 0 = no budget)");
  }
  if (!(rr.evictionBurst >= 1.0 && rr.evictionBurst <= 1000.0)) {
    d.error(base + "/restoreReserve/evictionBurst",
            formatNumber(rr.evictionBurst) + " is outside [1, 1000] (revocations saved up)");
  }
  if (!(rr.wasteBudget >= 0.0 && rr.wasteBudget < 1.0)) {
    d.error(base + "/restoreReserve/wasteBudget",
            formatNumber(rr.wasteBudget) +
                " is outside [0, 1) (a share of the sheddable bands' completed slot time; 0 = "
                "no budget)");
  }
  if (rr.wasteBurst <= Duration::zero()) {
    d.error(base + "/restoreReserve/wasteBurst",
            "must be positive, but got " + formatDuration(rr.wasteBurst));
  }
  if (!(rr.burstSignificance >= 0.0 && rr.burstSignificance <= 100.0)) {
    d.error(base + "/restoreReserve/burstSignificance",
            formatNumber(rr.burstSignificance) +
                " is outside [0, 100] (standard deviations of the protected arrivals' noise; 0 = "
                "restore at any time)");
  }
  if (!o.revokeOnBlock && !o.restoreReserve.enabled) {
    d.error(base + "/revokeOnBlock",
            "false needs restoreReserve.enabled (otherwise nothing would ever be revoked)");
  }
  if (requireEvict && o.enabled && !o.evict) {
    d.error(base + "/evict", "required when eviction is enabled: the host's evict callback");
  }
}

HOLDBACK_INLINE Duration deriveEvictionGrace(const SaturationDetector* detector,
                                             Duration scrapeInterval,
                                             Duration engineBudget) noexcept {
  if (dynamic_cast<const ConcurrencyDetector*>(detector) != nullptr) {
    return kInFlightSensorEvictionGrace;
  }
  if (const auto* util = dynamic_cast<const UtilizationDetector*>(detector)) {
    return scrapeInterval + util->options().metricsStalenessThreshold + engineBudget;
  }
  return kDefaultEvictionConfirmationGrace;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
