// Implementation of holdback/config/dispatch_ledger_config.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/config/dispatch_ledger_config.hpp"

#include <cstdint>
#include <limits>

#include "holdback/config/detail/field_table.hpp"
#include "holdback/detector/detail/dispatch_ledger_fields.hpp"
#include "holdback/detector/detectors.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

// The plugin object named `name` of an EndpointPickerConfig's plugin list (the plugin's name
// defaults to its type), with its index; null when there is none.
HOLDBACK_INLINE const Json* ledgerPluginNamed(const Json& document, std::string_view name,
                                              std::size_t& index) {
  const auto plugins = document.find("plugins");
  if (plugins == document.end() || !plugins->is_array()) return nullptr;
  for (std::size_t i = 0; i < plugins->size(); ++i) {
    const Json& p = (*plugins)[i];
    if (!p.is_object()) continue;
    const auto type = p.find("type");
    const auto named = p.find("name");
    const Json* label = named != p.end() && named->is_string() ? &*named
                        : type != p.end()                      ? &*type
                                                               : nullptr;
    if (label != nullptr && label->is_string() && label->get<std::string>() == name) {
      index = i;
      return &p;
    }
  }
  return nullptr;
}

// The deprecated block of one plugin object: its parameters.dispatchLedger when the plugin is a
// utilization-detector; null otherwise.
HOLDBACK_INLINE const Json* deprecatedLedgerBlock(const Json& plugin) {
  const auto type = plugin.find("type");
  if (type == plugin.end() || !type->is_string() ||
      type->get<std::string>() != UtilizationDetector::kType) {
    return nullptr;
  }
  const auto params = plugin.find("parameters");
  if (params == plugin.end() || !params->is_object()) return nullptr;
  const auto block = params->find("dispatchLedger");
  return block != params->end() ? &*block : nullptr;
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE DispatchLedgerOptions dispatchLedgerDefaults(const SaturationDetector* detector) {
  DispatchLedgerOptions options;
  // A library-internal cast: the utilization detector's own parameter.
  if (const auto* u = dynamic_cast<const UtilizationDetector*>(detector)) {
    options.budgetQueueDepth = u->options().queueDepthThreshold;
  }
  return options;
}

HOLDBACK_INLINE std::string dispatchLedgerDeprecation() {
  return "deprecated here: the dispatch ledger is the host's, not the detector's; move this "
         "block to flowControl.dispatchLedger (same keys)";
}

HOLDBACK_INLINE std::optional<DispatchLedgerOptions> parseDispatchLedgerOptions(
    const Json* block, const std::string& path, Diagnostics& diagnostics,
    DispatchLedgerOptions defaults) {
  const std::size_t errors_before = diagnostics.errorCount();
  DispatchLedgerOptions options = defaults;
  ParamReader sub(block, path, diagnostics);
  if (!sub.valid()) return std::nullopt;
  detail::readFields<DispatchLedgerOptions>(sub, kDispatchLedgerFields, options,
                                            [](std::string_view, DispatchLedgerOptions&) {});
  sub.finish();
  detail::warnDeprecated<DispatchLedgerOptions>(sub, kDispatchLedgerFields);
  DispatchLedger::validate(options, path, diagnostics);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  return options;
}

HOLDBACK_INLINE DispatchLedgerOptions loadDispatchLedgerOptions(const Json& document,
                                                                const SaturationDetector* detector,
                                                                Diagnostics& diagnostics) {
  const DispatchLedgerOptions defaults = dispatchLedgerDefaults(detector);
  if (!document.is_object()) return defaults;
  // The deprecated block: already checked (and warned about) by the detector's parser.
  const Json* old_block = nullptr;
  std::string old_path;
  if (document.contains("type")) {  // one plugin object
    old_block = detail::deprecatedLedgerBlock(document);
    old_path = "/parameters/dispatchLedger";
  } else if (detector != nullptr) {
    std::size_t index = 0;
    if (const Json* plugin = detail::ledgerPluginNamed(document, detector->name(), index)) {
      old_block = detail::deprecatedLedgerBlock(*plugin);
      old_path = "/plugins/" + std::to_string(index) + "/parameters/dispatchLedger";
    }
  }
  const Json* new_block = nullptr;
  if (const auto fc = document.find("flowControl"); fc != document.end() && fc->is_object()) {
    if (const auto b = fc->find("dispatchLedger"); b != fc->end()) new_block = &*b;
  }
  if (new_block != nullptr) {
    const std::string path = "/flowControl/dispatchLedger";
    if (old_block != nullptr) {
      diagnostics.error(path, "the dispatch ledger is set twice, here and at " + old_path +
                                  " (deprecated); keep only " + path);
    }
    return parseDispatchLedgerOptions(new_block, path, diagnostics, defaults).value_or(defaults);
  }
  if (old_block != nullptr) {
    Diagnostics reported;  // the detector's parser has reported them
    return parseDispatchLedgerOptions(old_block, old_path, reported, defaults).value_or(defaults);
  }
  return defaults;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
