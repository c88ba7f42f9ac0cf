// Implementation of holdback/config/effective_config.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/config/effective_config.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "holdback/config/detail/field_table.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"
#include "holdback/detector/detail/detectors_fields.hpp"
#include "holdback/detector/detail/dispatch_ledger_fields.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/detail/band_fields.hpp"
#include "holdback/flow/detail/band_scheduling_fields.hpp"
#include "holdback/flow/detail/program_aware_fairness_fields.hpp"
#include "holdback/flow/detail/vtc_fairness_fields.hpp"
#include "holdback/flow/options.hpp"
#include "holdback/policy/detail/policies_fields.hpp"
#include "holdback/policy/detail/reservation_fields.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

HOLDBACK_INLINE config::OrderedJson priorityMap(
    const std::vector<std::pair<Priority, double>>& entries) {
  config::OrderedJson out = config::OrderedJson::object();
  for (const auto& [priority, value] : entries) out[std::to_string(priority)] = value;
  return out;
}

// reservation-holdback-policy's `feedback` block after every default.
HOLDBACK_INLINE config::OrderedJson effectiveFeedback(const ReservationFeedback& f) {
  config::OrderedJson targets = config::OrderedJson::object();
  for (const ReservationWaitTarget& t : f.targets) {
    targets[std::to_string(t.priority)] = formatDuration(t.wait);
  }
  return {{"enabled", f.enabled},
          {"targetWait", formatDuration(f.targetWait)},
          {"targets", std::move(targets)},
          {"increase", f.increase},
          {"decrease", f.decrease},
          {"maxExtra", f.maxExtra},
          {"interval", formatDuration(f.interval)}};
}

// flowControl.eviction after every default (the grace as derived from the detector).
HOLDBACK_INLINE config::OrderedJson effectiveEviction(const EvictionOptions& e) {
  config::OrderedJson out = config::OrderedJson::object();
  out["maxRevocationsPerDecision"] = e.maxRevocationsPerDecision;
  out["confirmationTimeout"] = formatDuration(e.confirmationTimeout);
  out["confirmationGrace"] = formatDuration(e.confirmationGrace);
  out["waitForReleasesTolerance"] =
      e.waitForReleases.enabled ? config::OrderedJson(formatDuration(e.waitForReleases.tolerance))
                                : config::OrderedJson();
  out["footprintAware"] = e.footprintAware;
  out["revokeOnBlock"] = e.revokeOnBlock;
  out["restoreReserve"] = {{"enabled", e.restoreReserve.enabled},
                           {"epsilon", e.restoreReserve.epsilon},
                           {"leadTime", formatDuration(e.restoreReserve.leadTime)},
                           {"burstMemory", formatDuration(e.restoreReserve.burstMemory)}};
  out["filter"] = std::string(e.filter ? e.filter->name() : kSheddableEvictionFilterType);
  out["order"] = std::string(e.order ? e.order->name() : kPriorityThenTimeEvictionOrderType);
  return out;
}

HOLDBACK_INLINE config::OrderedJson optionalNumber(const std::optional<double>& v) {
  return v ? config::OrderedJson(*v) : config::OrderedJson(nullptr);
}

// A band after every default, its policies as the plugins they resolved to; `withPriority`: an
// entry of priorityBands (a template has no priority).
HOLDBACK_INLINE config::OrderedJson effectiveBand(const BandOptions& b, bool withPriority) {
  config::OrderedJson band =
      writeFields<BandOptions>(kBandFields, b, [](std::string_view key, const BandOptions& o) {
        const auto plugin = [](const auto& p) -> config::OrderedJson {
          return {{"type", std::string(p.type())}, {"parameters", config::effectiveParameters(p)}};
        };
        if (key == "fairnessPolicyRef") {
          return plugin(o.fairness ? *o.fairness : *globalStrictFairness());
        }
        return plugin(o.ordering ? *o.ordering : *fcfsOrdering());
      });
  if (!withPriority) band.erase("priority");
  return band;
}

HOLDBACK_INLINE config::OrderedJson effectiveBand(const BandTemplate& t) {
  BandOptions b;
  b.maxRequests = t.maxRequests;
  b.maxBytes = t.maxBytes;
  b.fairness = t.fairness;
  b.ordering = t.ordering;
  b.requestTtl = t.requestTtl;
  b.weight = t.weight;
  return effectiveBand(b, /*withPriority=*/false);
}

HOLDBACK_INLINE config::OrderedJson utilizationDetectorParameters(
    const UtilizationDetectorOptions& o) {
  return writeFields<UtilizationDetectorOptions>(
      kUtilizationDetectorFields, o,
      [](std::string_view, const UtilizationDetectorOptions& options) {
        // endpointScoreCap: uncapped as the config spells it ("none"; JSON has no infinity).
        return std::isinf(options.endpointScoreCap) ? config::OrderedJson("none")
                                                    : config::OrderedJson(options.endpointScoreCap);
      });
}

HOLDBACK_INLINE config::OrderedJson concurrencyDetectorParameters(
    const ConcurrencyDetectorOptions& o) {
  return writeFields<ConcurrencyDetectorOptions>(kConcurrencyDetectorFields, o);
}

HOLDBACK_INLINE config::OrderedJson dispatchLedgerParameters(const DispatchLedgerOptions& o) {
  return writeFields<DispatchLedgerOptions>(kDispatchLedgerFields, o);
}

HOLDBACK_INLINE config::OrderedJson bandSchedulingParameters(const BandSchedulingOptions& o) {
  return writeFields<BandSchedulingOptions>(kBandSchedulingFields, o);
}

HOLDBACK_INLINE config::OrderedJson programAwareFairnessParameters(
    const ProgramAwareFairnessOptions& o) {
  return writeFields<ProgramAwareFairnessOptions>(
      kProgramAwareFairnessFields, o,
      [](std::string_view, const ProgramAwareFairnessOptions& options) {
        return config::OrderedJson(options.strategy);  // the one row written by hand
      });
}

HOLDBACK_INLINE config::OrderedJson vtcFairnessParameters(const VtcFairnessOptions& o) {
  return writeFields<VtcFairnessOptions>(kVtcFairnessFields, o);
}

// The effective parameters of each ported plugin: its field table, and the rows written by hand.
HOLDBACK_INLINE config::OrderedJson staticUsageLimitParameters(const StaticUsageLimitOptions& o) {
  return writeFields<StaticUsageLimitOptions>(kStaticUsageLimitFields, o);
}

HOLDBACK_INLINE config::OrderedJson priorityHoldbackParameters(const PriorityHoldbackOptions& o) {
  return writeFields<PriorityHoldbackOptions>(
      kPriorityHoldbackFields, o, [](std::string_view key, const PriorityHoldbackOptions& options) {
        // strategy and sigmoidDomain are written from their bindings.
        if (key != "ceilings") return config::OrderedJson(config::OrderedJson::value_t::discarded);
        std::vector<std::pair<Priority, double>> ceilings;
        for (const StaticCeiling& c : options.ceilings)
          ceilings.emplace_back(c.priority, c.ceiling);
        return priorityMap(ceilings);
      });
}

HOLDBACK_INLINE config::OrderedJson reservationParameters(const ReservationOptions& o) {
  return writeFields<ReservationOptions>(
      kReservationFields, o, [](std::string_view key, const ReservationOptions& options) {
        if (key == "feedback") return effectiveFeedback(options.feedback);
        std::vector<std::pair<Priority, double>> epsilons;
        for (const ReservationEpsilon& e : options.epsilons) {
          epsilons.emplace_back(e.priority, e.epsilon);
        }
        return priorityMap(epsilons);
      });
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE OrderedJson effectiveParameters(const UsageLimitPolicy& policy) {
  if (const auto* p = dynamic_cast<const StaticUsageLimitPolicy*>(&policy)) {
    return detail::staticUsageLimitParameters(p->options());
  }
  if (const auto* p = dynamic_cast<const PriorityHoldbackPolicy*>(&policy)) {
    return detail::priorityHoldbackParameters(p->options());
  }
  if (const auto* p = dynamic_cast<const ReservationPolicy*>(&policy)) {
    return detail::reservationParameters(p->options());
  }
  if (dynamic_cast<const SoftReflectiveCeilingPolicy*>(&policy) != nullptr) {
    return OrderedJson::object();
  }
  return nullptr;
}

HOLDBACK_INLINE OrderedJson effectiveParameters(const SaturationDetector& detector) {
  if (const auto* d = dynamic_cast<const UtilizationDetector*>(&detector)) {
    return detail::utilizationDetectorParameters(d->options());
  }
  if (const auto* d = dynamic_cast<const ConcurrencyDetector*>(&detector)) {
    return detail::concurrencyDetectorParameters(d->options());
  }
  return nullptr;
}

HOLDBACK_INLINE OrderedJson effectiveParameters(const FairnessPolicy& policy) {
  if (const auto* p = dynamic_cast<const ProgramAwareFairnessPolicy*>(&policy)) {
    return detail::programAwareFairnessParameters(p->options());
  }
  if (const auto* p = dynamic_cast<const VtcFairnessPolicy*>(&policy)) {
    return detail::vtcFairnessParameters(p->options());
  }
  if (dynamic_cast<const GlobalStrictFairnessPolicy*>(&policy) != nullptr ||
      dynamic_cast<const RoundRobinFairnessPolicy*>(&policy) != nullptr) {
    return OrderedJson::object();
  }
  return nullptr;
}

HOLDBACK_INLINE OrderedJson effectiveParameters(const OrderingPolicy& policy) {
  if (dynamic_cast<const FcfsOrderingPolicy*>(&policy) != nullptr ||
      dynamic_cast<const EdfOrderingPolicy*>(&policy) != nullptr ||
      dynamic_cast<const SloDeadlineOrderingPolicy*>(&policy) != nullptr) {
    return OrderedJson::object();
  }
  return nullptr;
}

HOLDBACK_INLINE OrderedJson configSchema() {
  OrderedJson sections = OrderedJson::array();
  const auto section = [&](std::string_view name, OrderedJson fields) {
    sections.push_back({{"section", std::string(name)}, {"fields", std::move(fields)}});
  };
  section(StaticUsageLimitPolicy::kType,
          detail::fieldsSchema<StaticUsageLimitOptions>(kStaticUsageLimitFields,
                                                        detail::staticUsageLimitParameters({})));
  section(PriorityHoldbackPolicy::kType,
          detail::fieldsSchema<PriorityHoldbackOptions>(kPriorityHoldbackFields,
                                                        detail::priorityHoldbackParameters({})));
  section(ReservationPolicy::kType, detail::fieldsSchema<ReservationOptions>(
                                        kReservationFields, detail::reservationParameters({})));
  section(UtilizationDetector::kType,
          detail::fieldsSchema<UtilizationDetectorOptions>(
              kUtilizationDetectorFields, detail::utilizationDetectorParameters({})));
  section(ConcurrencyDetector::kType,
          detail::fieldsSchema<ConcurrencyDetectorOptions>(
              kConcurrencyDetectorFields, detail::concurrencyDetectorParameters({})));
  // The ledger's keys are flowControl's, under dispatchLedger.
  section("flowControl",
          detail::fieldsSchema<DispatchLedgerOptions>(
              kDispatchLedgerFields, detail::dispatchLedgerParameters({}), "dispatchLedger."));
  section("flowControl",
          detail::fieldsSchema<BandSchedulingOptions>(
              kBandSchedulingFields, detail::bandSchedulingParameters({}), "bandScheduling."));
  section(ProgramAwareFairnessPolicy::kType,
          detail::fieldsSchema<ProgramAwareFairnessOptions>(
              kProgramAwareFairnessFields, detail::programAwareFairnessParameters({})));
  // The keys of every band object (the two templates and each entry of priorityBands).
  section("band", detail::fieldsSchema<BandOptions>(kBandFields, detail::effectiveBand({}, true)));
  section(VtcFairnessPolicy::kType, detail::fieldsSchema<VtcFairnessOptions>(
                                        kVtcFairnessFields, detail::vtcFairnessParameters({})));
  return {{"schemaVersion", kEffectiveConfigSchemaVersion}, {"sections", std::move(sections)}};
}

HOLDBACK_INLINE OrderedJson effectiveConfig(const ConfigBundle& bundle) {
  const FlowControllerOptions& o = bundle.controller;
  OrderedJson out = OrderedJson::object();
  out["schemaVersion"] = kEffectiveConfigSchemaVersion;
  out["flowControl"] = bundle.flowControlEnabled;
  out["profile"] = bundle.profile;
  out["enginePriority"] = std::string(toString(bundle.enginePriority));
  if (bundle.policy) {
    out["usageLimitPolicy"] = {{"name", std::string(bundle.policy->name())},
                               {"type", std::string(bundle.policy->type())},
                               {"parameters", effectiveParameters(*bundle.policy)}};
  }
  if (bundle.detector) {
    out["saturationDetector"] = {{"name", std::string(bundle.detector->name())},
                                 {"type", std::string(bundle.detector->type())},
                                 {"parameters", effectiveParameters(*bundle.detector)}};
  }
  out["dispatchLedger"] = detail::dispatchLedgerParameters(bundle.dispatchLedger);
  out["maxRequests"] = o.maxRequests;
  out["maxBytes"] = o.maxBytes;
  const Duration ttl = o.defaultRequestTtl.value_or(kDefaultRequestTtl);
  out["defaultRequestTTL"] = formatDuration(ttl);
  out["noEndpointRequestTTL"] = formatDuration(o.noEndpointRequestTtl.value_or(ttl));
  out["enableEviction"] = bundle.enableEviction;
  out["eviction"] = detail::effectiveEviction(o.eviction);
  out["fairnessIdLabelLimit"] = o.fairnessIdLabelLimit;
  out["bandScheduling"] = detail::bandSchedulingParameters(o.bandScheduling);
  out["defaultPriorityBand"] = detail::effectiveBand(o.defaultBand);
  out["defaultNegativePriorityBand"] =
      o.defaultNegativeBand ? detail::effectiveBand(*o.defaultNegativeBand) : OrderedJson();
  std::vector<BandOptions> bands = o.bands;
  std::sort(bands.begin(), bands.end(),
            [](const BandOptions& a, const BandOptions& b) { return a.priority > b.priority; });
  OrderedJson list = OrderedJson::array();
  for (const BandOptions& b : bands) list.push_back(detail::effectiveBand(b, true));
  out["priorityBands"] = std::move(list);
  return out;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
