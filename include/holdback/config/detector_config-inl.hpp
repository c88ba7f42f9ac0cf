// Implementation of holdback/config/detector_config.hpp: compiled into libholdback by
// src/config/detector_config.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/detector_config.hpp"

#include "holdback/config/detail/field_table.hpp"

#include <cmath>
#include <limits>
#include <map>

#include "holdback/core/duration.hpp"
#include "holdback/detector/detail/concurrency_detector_fields.hpp"
#include "holdback/detector/detail/detectors_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

template <class Detector, class Options, class Read>
std::optional<Options> parseOptions(const Json* parameters, const std::string& path,
                                    Diagnostics& diagnostics, Read read) {
  const std::size_t errors_before = diagnostics.errorCount();
  ParamReader reader(parameters, path, diagnostics);
  if (!reader.valid()) return std::nullopt;
  Options options;
  read(reader, options);
  reader.finish();
  if (diagnostics.errorCount() > errors_before) {
    // Still range-check what could be read, so that every problem is reported at once.
    Diagnostics checks;
    Detector::validate(options, path, checks);
    for (const Diagnostic& d : checks.errors()) diagnostics.add(d);
    return std::nullopt;
  }
  Detector::validate(options, path, diagnostics);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return options;
}

template <class Detector, class Options>
std::unique_ptr<SaturationDetector> build(const std::optional<Options>& options,
                                          const PluginSpec& spec) {
  if (!options) return nullptr;
  auto made = Detector::create(*options, spec.name);
  if (!made) return nullptr;
  return std::move(made).value();
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE std::optional<UtilizationDetectorOptions> parseUtilizationDetectorOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics) {
  return detail::parseOptions<UtilizationDetector, UtilizationDetectorOptions>(
      parameters, path, diagnostics, [](ParamReader& reader, UtilizationDetectorOptions& options) {
        detail::readFields<UtilizationDetectorOptions>(
            reader, kUtilizationDetectorFields, options,
            [&](std::string_view key, UtilizationDetectorOptions& o) {
              // endpointScoreCap, the one row read by hand: a number or "none".
              const Json* cap = reader.value(key);
              if (cap == nullptr) return;
              if (cap->is_string() && cap->get<std::string>() == "none") {
                o.endpointScoreCap = UtilizationDetector::kUncapped;
              } else if (cap->is_number()) {
                o.endpointScoreCap = cap->get<double>();
              } else {
                reader.error(key, mismatch(*cap, "a number > 0 or \"none\""));
              }
            });
        detail::warnDeprecated<UtilizationDetectorOptions>(reader, kUtilizationDetectorFields);
        // The deprecated place of the host's dispatch ledger (config/dispatch_ledger_config.hpp):
        // checked here, with a warning; the whole-file loader reads it into the bundle.
        if (const Json* ledger = reader.value("dispatchLedger")) {
          reader.diagnostics().warning(reader.pathOf("dispatchLedger"),
                                       dispatchLedgerDeprecation());
          (void)parseDispatchLedgerOptions(ledger, reader.pathOf("dispatchLedger"),
                                           reader.diagnostics());
        }
      });
}

HOLDBACK_INLINE std::optional<ConcurrencyDetectorOptions> parseConcurrencyDetectorOptions(
    const Json* parameters, const std::string& path, Diagnostics& diagnostics) {
  return detail::parseOptions<ConcurrencyDetector, ConcurrencyDetectorOptions>(
      parameters, path, diagnostics, [](ParamReader& reader, ConcurrencyDetectorOptions& options) {
        detail::readFields<ConcurrencyDetectorOptions>(
            reader, kConcurrencyDetectorFields, options,
            [](std::string_view, ConcurrencyDetectorOptions&) {});
        if (const auto v = reader.string("inFlightLoadProducerName"); v && !v->empty()) {
          reader.diagnostics().warning(
              reader.pathOf("inFlightLoadProducerName"),
              "\"" + *v +
                  "\" has no effect: in holdback the host feeds in-flight counts "
                  "(Endpoint::inFlightRequests/inFlightTokens, e.g. from an InFlightTracker)");
        }
      });
}

HOLDBACK_INLINE DetectorRegistry builtinDetectorRegistry() {
  DetectorRegistry registry;
  registry.add(std::string(UtilizationDetector::kType), [](const PluginSpec& spec,
                                                           Diagnostics& diagnostics) {
    return detail::build<UtilizationDetector>(
        parseUtilizationDetectorOptions(spec.parameters, spec.parametersPath(), diagnostics), spec);
  });
  registry.add(std::string(ConcurrencyDetector::kType), [](const PluginSpec& spec,
                                                           Diagnostics& diagnostics) {
    return detail::build<ConcurrencyDetector>(
        parseConcurrencyDetectorOptions(spec.parameters, spec.parametersPath(), diagnostics), spec);
  });
  return registry;
}

HOLDBACK_INLINE PluginSlot<SaturationDetector> saturationDetectorSlot() {
  PluginSlot<SaturationDetector> slot;
  slot.kind = "saturation detector";
  slot.defaultName = UtilizationDetector::kType;
  slot.makeDefault = [] {
    return std::shared_ptr<SaturationDetector>(std::move(UtilizationDetector::create()).value());
  };
  slot.readRef = [](const Json& document, std::string& refPath, Diagnostics& diagnostics) {
    if (const auto fc = document.find("flowControl"); fc != document.end() && !fc->is_object()) {
      diagnostics.error("/flowControl", mismatch(*fc, "an object"));
    }
    return readSaturationDetectorRef(document, refPath, diagnostics);
  };
  return slot;
}

HOLDBACK_INLINE Result<std::shared_ptr<SaturationDetector>> loadSaturationDetector(
    const Json& document, const DetectorRegistry& registry) {
  return loadPlugin(document, registry, saturationDetectorSlot());
}

HOLDBACK_INLINE std::optional<std::string> readSaturationDetectorRef(const Json& document,
                                                                     std::string& refPath,
                                                                     Diagnostics& diagnostics) {
  const auto readRef = [&](const Json& holder, const std::string& path) {
    std::optional<std::string> ref;
    const auto sd = holder.find("saturationDetector");
    if (sd == holder.end()) return ref;
    ParamReader reader(&*sd, path, diagnostics);
    ref = reader.string("pluginRef");
    reader.finish();
    if (ref && ref->empty()) ref.reset();
    return ref;
  };
  std::optional<std::string> ref;
  refPath = "/flowControl/saturationDetector/pluginRef";
  if (const auto fc = document.find("flowControl"); fc != document.end() && fc->is_object()) {
    ref = readRef(*fc, "/flowControl/saturationDetector");
  }
  if (document.contains("saturationDetector")) {
    diagnostics.warning("/saturationDetector",
                        "deprecated; use /flowControl/saturationDetector (which wins when both "
                        "are set)");
    auto deprecated = readRef(document, "/saturationDetector");
    if (!ref && deprecated) {
      ref = std::move(deprecated);
      refPath = "/saturationDetector/pluginRef";
    }
  }
  return ref;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
