// Implementation of holdback/config/plugin.hpp: compiled into libholdback by src/config.cpp, or
// included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/config/plugin.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

HOLDBACK_INLINE std::optional<PluginSpec> readPluginSpec(const Json& plugin,
                                                         const std::string& path,
                                                         Diagnostics& diagnostics) {
  const std::size_t errors_before = diagnostics.errorCount();
  ParamReader reader(&plugin, path, diagnostics);
  if (diagnostics.errorCount() > errors_before) return std::nullopt;
  PluginSpec spec;
  spec.path = path;
  const auto type = reader.string("type");
  if (!reader.has("type")) reader.error("type", "missing; every plugin needs a \"type\"");
  const auto name = reader.string("name");
  if (name && name->empty()) reader.error("name", "is empty; omit it to default to the type");
  spec.parameters = reader.value("parameters");
  reader.finish();
  if (!type || diagnostics.errorCount() > errors_before) return std::nullopt;
  spec.type = *type;
  spec.name = name.value_or(*type);
  return spec;
}

HOLDBACK_INLINE std::vector<PluginSpec> readPluginList(const Json& document,
                                                       Diagnostics& diagnostics) {
  std::vector<PluginSpec> specs;
  const auto it = document.find("plugins");
  if (it == document.end()) return specs;
  if (!it->is_array()) {
    diagnostics.error("/plugins", mismatch(*it, "an array of plugin objects"));
    return specs;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string path = "/plugins/" + std::to_string(i);
    auto spec = readPluginSpec((*it)[i], path, diagnostics);
    if (!spec) continue;
    if (const PluginSpec* seen = findPlugin(specs, spec->name)) {
      diagnostics.error(path + "/name", "duplicate plugin name \"" + spec->name +
                                            "\" (first defined at " + seen->path +
                                            "); plugin names must be unique");
      continue;
    }
    specs.push_back(std::move(*spec));
  }
  return specs;
}

HOLDBACK_INLINE const PluginSpec* findPlugin(const std::vector<PluginSpec>& specs,
                                             std::string_view name) {
  for (const PluginSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
