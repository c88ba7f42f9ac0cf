// Implementation of holdback/config/flow_plugin_config.hpp: compiled into libholdback by
// src/config.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY,
// holdback::header_only).
#pragma once

#include "holdback/config/flow_plugin_config.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "holdback/config/detail/field_table.hpp"
#include "holdback/config/json.hpp"
#include "holdback/flow/detail/program_aware_fairness_fields.hpp"
#include "holdback/flow/detail/vtc_fairness_fields.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {
using namespace config;  // NOLINT(google-build-using-namespace): the config layer's internals

template <class Interface>
std::unique_ptr<Interface> noParameters(const PluginSpec& spec, Diagnostics& diagnostics,
                                        std::unique_ptr<Interface> made) {
  ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
  params.finish();
  return made;
}

// program-aware-fairness parameters, spelled as upstream (seconds as numbers).
HOLDBACK_INLINE std::unique_ptr<FairnessPolicy> parseProgramAwareFairness(
    const PluginSpec& spec, Diagnostics& diagnostics) {
  ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
  ProgramAwareFairnessOptions o;
  const std::size_t before = diagnostics.errorCount();
  // strategy is a string (the table's only row read by hand).
  readFields<ProgramAwareFairnessOptions>(
      params, kProgramAwareFairnessFields, o,
      [&](std::string_view key, ProgramAwareFairnessOptions& options) {
        if (const auto v = params.string(key)) options.strategy = *v;
      });
  params.finish();
  ProgramAwareFairnessPolicy::validate(o, spec.parametersPath(), diagnostics);
  if (diagnostics.errorCount() > before) return nullptr;
  auto made = ProgramAwareFairnessPolicy::create(std::move(o), spec.name);
  if (!made) return nullptr;
  return std::move(made).value();
}

// vtc-fairness-policy parameters: requestCost, tokenWeight.
HOLDBACK_INLINE std::unique_ptr<FairnessPolicy> parseVtcFairness(const PluginSpec& spec,
                                                                 Diagnostics& diagnostics) {
  ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
  VtcFairnessOptions o;
  const std::size_t before = diagnostics.errorCount();
  // Only tokenWeight / requestCost matters (every flow's service scales alike): requestCost is
  // deprecated.
  readFields<VtcFairnessOptions>(params, kVtcFairnessFields, o,
                                 [](std::string_view, VtcFairnessOptions&) {});
  params.finish();
  warnDeprecated<VtcFairnessOptions>(params, kVtcFairnessFields);
  VtcFairnessPolicy::validate(o, spec.parametersPath(), diagnostics);
  if (diagnostics.errorCount() > before) return nullptr;
  auto made = VtcFairnessPolicy::create(o);
  if (!made) return nullptr;
  return std::move(made).value();
}

}  // namespace detail

namespace config {

HOLDBACK_INLINE FairnessRegistry builtinFairnessRegistry() {
  FairnessRegistry registry;
  registry.add(std::string(GlobalStrictFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<FairnessPolicy>(
                     spec, diagnostics, std::make_unique<GlobalStrictFairnessPolicy>());
               });
  registry.add(std::string(RoundRobinFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<FairnessPolicy>(
                     spec, diagnostics, std::make_unique<RoundRobinFairnessPolicy>());
               });
  registry.add(std::string(ProgramAwareFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::parseProgramAwareFairness(spec, diagnostics);
               });
  registry.add(std::string(VtcFairnessPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::parseVtcFairness(spec, diagnostics);
               });
  return registry;
}

HOLDBACK_INLINE EvictionFilterRegistry builtinEvictionFilterRegistry() {
  EvictionFilterRegistry registry;
  registry.add(std::string(kSheddableEvictionFilterType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<EvictionFilter>(
                     spec, diagnostics, std::make_unique<SheddableEvictionFilter>());
               });
  return registry;
}

HOLDBACK_INLINE EvictionOrderRegistry builtinEvictionOrderRegistry() {
  EvictionOrderRegistry registry;
  registry.add(std::string(kPriorityThenTimeEvictionOrderType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<EvictionOrderPolicy>(
                     spec, diagnostics, std::make_unique<PriorityThenTimeEvictionOrder>());
               });
  return registry;
}

HOLDBACK_INLINE OrderingRegistry builtinOrderingRegistry() {
  OrderingRegistry registry;
  registry.add(std::string(FcfsOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(
                     spec, diagnostics, std::make_unique<FcfsOrderingPolicy>());
               });
  registry.add(std::string(EdfOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(spec, diagnostics,
                                                             std::make_unique<EdfOrderingPolicy>());
               });
  registry.add(std::string(SloDeadlineOrderingPolicy::kType),
               [](const PluginSpec& spec, Diagnostics& diagnostics) {
                 return detail::noParameters<OrderingPolicy>(
                     spec, diagnostics, std::make_unique<SloDeadlineOrderingPolicy>());
               });
  return registry;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
