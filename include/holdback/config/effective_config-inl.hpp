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
#include "holdback/config/detail/flow_control_fields.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"
#include "holdback/detector/detail/detectors_fields.hpp"
#include "holdback/detector/detail/dispatch_ledger_fields.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/detail/band_fields.hpp"
#include "holdback/flow/detail/band_scheduling_fields.hpp"
#include "holdback/flow/detail/eviction_fields.hpp"
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

// flowControl.eviction.restoreReserve after every default (epsilon, read by hand, written from its
// binding).
HOLDBACK_INLINE config::OrderedJson reserveRestoreParameters(const ReserveRestoreOptions& r) {
  return writeFields<ReserveRestoreOptions>(
      kReserveRestoreFields, r, [](std::string_view, const ReserveRestoreOptions&) {
        return config::OrderedJson(config::OrderedJson::value_t::discarded);
      });
}

// flowControl.eviction after every default (the grace as derived from the detector), and the
// plugins its filter and order are.
HOLDBACK_INLINE config::OrderedJson effectiveEviction(const EvictionOptions& e) {
  config::OrderedJson out = writeFields<EvictionOptions>(
      kEvictionFields, e, [](std::string_view key, const EvictionOptions& o) {
        if (key == "restoreReserve") return reserveRestoreParameters(o.restoreReserve);
        return o.waitForReleases.enabled  // waitForReleasesTolerance
                   ? config::OrderedJson(formatDuration(o.waitForReleases.tolerance))
                   : config::OrderedJson();
      });
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
        if (key == "weight") return config::OrderedJson(config::OrderedJson::value_t::discarded);
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

// The flowControl keys after every default, in the table's order (the blocks written by hand).
HOLDBACK_INLINE config::OrderedJson flowControlParameters(const config::ConfigBundle& bundle) {
  using config::OrderedJson;
  const FlowControllerOptions& o = bundle.controller;
  const Duration ttl = o.defaultRequestTtl.value_or(kDefaultRequestTtl);
  const auto plugin = [](const auto& p) -> OrderedJson {
    return {{"name", std::string(p.name())},
            {"type", std::string(p.type())},
            {"parameters", config::effectiveParameters(p)}};
  };
  return writeFields<config::ConfigBundle>(
      kFlowControlFields, bundle,
      [&](std::string_view key, const config::ConfigBundle& b) -> OrderedJson {
        if (key == "profile") return b.profile;
        if (key == "usageLimitPolicyPluginRef") return plugin(*b.policy);
        if (key == "saturationDetector") return plugin(*b.detector);
        if (key == "dispatchLedger") return dispatchLedgerParameters(b.dispatchLedger);
        if (key == "defaultRequestTTL") return formatDuration(ttl);
        if (key == "noEndpointRequestTTL")
          return formatDuration(o.noEndpointRequestTtl.value_or(ttl));
        if (key == "eviction") return effectiveEviction(o.eviction);
        if (key == "bandScheduling") return bandSchedulingParameters(o.bandScheduling);
        if (key == "defaultPriorityBand") return effectiveBand(o.defaultBand);
        if (key == "defaultNegativePriorityBand") {
          return o.defaultNegativeBand ? effectiveBand(*o.defaultNegativeBand) : OrderedJson();
        }
        std::vector<BandOptions> bands = o.bands;  // priorityBands, highest first
        std::sort(bands.begin(), bands.end(), [](const BandOptions& x, const BandOptions& y) {
          return x.priority > y.priority;
        });
        OrderedJson list = OrderedJson::array();
        for (const BandOptions& band : bands) list.push_back(effectiveBand(band, true));
        return list;
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
  // flowControl's own keys, and its blocks' under their prefix.
  section("flowControl", detail::fieldsSchema<ConfigBundle>(
                             kFlowControlFields, detail::flowControlParameters(ConfigBundle{})));
  section("flowControl", detail::fieldsSchema<EvictionOptions>(
                             kEvictionFields, detail::effectiveEviction({}), "eviction."));
  section("flowControl", detail::fieldsSchema<ReserveRestoreOptions>(
                             kReserveRestoreFields, detail::reserveRestoreParameters({}),
                             "eviction.restoreReserve."));
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
  OrderedJson out = OrderedJson::object();
  out["schemaVersion"] = kEffectiveConfigSchemaVersion;
  out["flowControl"] = bundle.flowControlEnabled;
  OrderedJson flow_control = detail::flowControlParameters(bundle);
  for (auto& [key, value] : flow_control.items()) out[key] = std::move(value);
  return out;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
