// Plugins: the {"type", "name", "parameters"} objects of an EndpointPickerConfig, and a registry
// that maps a type name to a factory so a host can add its own types beside the built-in ones.
//
// Thread safety: PluginRegistry is thread-compatible (register everything before sharing it;
// concurrent create() calls on an unchanging registry are safe).
#pragma once

#include "holdback/abi.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/core/diagnostics.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace config {

struct PluginSpec {
  std::string type;
  std::string name;                  // defaults to the type
  const Json* parameters = nullptr;  // null when absent
  std::string path;                  // JSON pointer of the plugin object ("" for a whole file)

  [[nodiscard]] std::string parametersPath() const { return path + "/parameters"; }
};

// Reads a plugin object at `path`. Reports a missing or non-string "type", a non-string "name",
// and unknown keys. Returns nullopt when the object cannot describe a plugin.
HOLDBACK_API std::optional<PluginSpec> readPluginSpec(const Json& plugin, const std::string& path,
                                                      Diagnostics& diagnostics);

template <class Interface>
class PluginRegistry {
 public:
  // A factory reports every problem with spec.parametersPath()-based paths into `diagnostics` and
  // returns null when it cannot build the plugin.
  using Factory =
      std::function<std::unique_ptr<Interface>(const PluginSpec& spec, Diagnostics& diagnostics)>;

  // Returns false (and changes nothing) when `type` is already registered.
  bool add(std::string type, Factory factory) {
    return factories_.emplace(std::move(type), std::move(factory)).second;
  }
  [[nodiscard]] bool contains(std::string_view type) const {
    return factories_.find(type) != factories_.end();
  }
  [[nodiscard]] std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const auto& [type, factory] : factories_) out.push_back(type);
    return out;
  }

  Result<std::unique_ptr<Interface>> create(const PluginSpec& spec) const {
    Diagnostics diagnostics;
    const auto it = factories_.find(spec.type);
    if (it == factories_.end()) {
      std::string known;
      for (const auto& [type, factory] : factories_) {
        known += known.empty() ? "" : ", ";
        known += type;
      }
      diagnostics.error(spec.path + "/type",
                        "\"" + spec.type + "\" is not a registered type; registered: " + known);
      return Result<std::unique_ptr<Interface>>::failure(std::move(diagnostics));
    }
    std::unique_ptr<Interface> plugin = it->second(spec, diagnostics);
    if (plugin == nullptr || diagnostics.hasErrors()) {
      if (!diagnostics.hasErrors()) diagnostics.error(spec.path, "plugin could not be created");
      return Result<std::unique_ptr<Interface>>::failure(std::move(diagnostics));
    }
    return Result<std::unique_ptr<Interface>>(std::move(plugin), std::move(diagnostics));
  }

 private:
  std::map<std::string, Factory, std::less<>> factories_;
};

// A document that is a single plugin object ({"type": ...}) built with `registry`, or a failure
// when the document is not an object at all. nullopt when the document is an
// EndpointPickerConfig, which the caller resolves itself.
template <class Interface>
std::optional<Result<std::shared_ptr<Interface>>> loadSinglePlugin(
    const Json& document, const PluginRegistry<Interface>& registry) {
  using Out = Result<std::shared_ptr<Interface>>;
  Diagnostics diagnostics;
  if (!document.is_object()) {
    diagnostics.error("", mismatch(document, "a plugin object or an EndpointPickerConfig"));
    return Out::failure(std::move(diagnostics));
  }
  if (!document.contains("type")) return std::nullopt;
  const auto spec = readPluginSpec(document, "", diagnostics);
  if (!spec) return Out::failure(std::move(diagnostics));
  auto made = registry.create(*spec);
  diagnostics.append(made.diagnostics());
  if (!made) return Out::failure(std::move(diagnostics));
  return Out(std::shared_ptr<Interface>(std::move(made).value()), std::move(diagnostics));
}

// Every well-formed plugin of an EndpointPickerConfig's "plugins" array, in order. Reports
// malformed entries and duplicate names (a duplicate is left out). An absent array is empty.
HOLDBACK_API std::vector<PluginSpec> readPluginList(const Json& document, Diagnostics& diagnostics);

// The spec named `name`, or null.
HOLDBACK_API const PluginSpec* findPlugin(const std::vector<PluginSpec>& specs,
                                          std::string_view name);

// Builds every plugin in `specs` whose type `registry` knows, appending their diagnostics.
// Plugins of other types are skipped; when `kind` is not empty each gets a warning saying it is
// not a `kind` type. Returns name -> plugin for those that were built.
template <class Interface>
std::map<std::string, std::shared_ptr<Interface>, std::less<>> buildPlugins(
    const std::vector<PluginSpec>& specs, const PluginRegistry<Interface>& registry,
    Diagnostics& diagnostics, std::string_view kind = {}) {
  std::map<std::string, std::shared_ptr<Interface>, std::less<>> built;
  for (const PluginSpec& spec : specs) {
    if (!registry.contains(spec.type)) {
      if (!kind.empty()) {
        diagnostics.warning(spec.path + "/type", "\"" + spec.type + "\" is not a " +
                                                     std::string(kind) + " type; not checked here");
      }
      continue;
    }
    auto made = registry.create(spec);
    diagnostics.append(made.diagnostics());
    if (made) built.emplace(spec.name, std::move(made).value());
  }
  return built;
}

// Reports why `ref` (at `refPath`) does not resolve to a `kind` ("an" before a, e, i, o; "a"
// otherwise, which suits the kinds used: usage limit policy, ordering policy, ...): it names no
// plugin, or a plugin of a type `registry` does not know. A plugin of a known type that failed to
// build has already been reported and adds nothing here.
template <class Interface>
void reportUnresolvedRef(const std::string& refPath, const std::string& ref,
                         const std::vector<PluginSpec>& specs,
                         const PluginRegistry<Interface>& registry, std::string_view kind,
                         Diagnostics& diagnostics) {
  const PluginSpec* spec = findPlugin(specs, ref);
  if (spec == nullptr) {
    std::string names;
    for (const PluginSpec& s : specs) names += (names.empty() ? "" : ", ") + s.name;
    diagnostics.error(refPath, "\"" + ref + "\" names no plugin; defined plugins: " +
                                   (names.empty() ? std::string("none") : names));
  } else if (!registry.contains(spec->type)) {
    diagnostics.error(
        refPath, "\"" + ref + "\" names a plugin of type \"" + spec->type + "\", which is not " +
                     (kind.find_first_of("aeio") == 0 ? "an " : "a ") + std::string(kind));
  }
}

// The plugin a ref selects among `built` (from buildPlugins). With a ref: the plugin it names,
// the default when the ref is `defaultName` and no plugin has that name, or null after
// reportUnresolvedRef at `refPath` (a plugin that failed to build has already been
// reported). Without a ref: the plugin named `defaultName` if one was built, else makeDefault().
template <class Interface, class MakeDefault>
std::shared_ptr<Interface> resolvePluginRef(
    const std::optional<std::string>& ref, const std::string& refPath, std::string_view defaultName,
    const std::map<std::string, std::shared_ptr<Interface>, std::less<>>& built,
    const std::vector<PluginSpec>& specs, const PluginRegistry<Interface>& registry,
    std::string_view kind, Diagnostics& diagnostics, MakeDefault makeDefault) {
  if (ref) {
    if (const auto it = built.find(*ref); it != built.end()) return it->second;
    // A ref to the default's name that the file does not declare gets the default, as the
    // reference's loader adds static-usage-limit-policy and utilization-detector itself.
    if (*ref == defaultName && findPlugin(specs, *ref) == nullptr) return makeDefault();
    reportUnresolvedRef(refPath, *ref, specs, registry, kind, diagnostics);
    return nullptr;
  }
  if (const auto it = built.find(defaultName); it != built.end()) return it->second;
  return makeDefault();
}

// One plugin slot of an EndpointPickerConfig (the usage limit policy, the saturation detector):
// how its ref is read and what it defaults to. The one-file loaders (loadPlugin) and the
// whole-file loader (loadEndpointPickerConfig) resolve a slot the same way through it.
template <class Interface>
struct PluginSlot {
  // In messages: "usage limit policy".
  std::string_view kind;
  // Without a ref: the plugin of this name if one was defined, else makeDefault().
  std::string_view defaultName;
  std::shared_ptr<Interface> (*makeDefault)() = nullptr;
  // Reads the slot's ref from an EndpointPickerConfig document (nullopt = none) and sets refPath
  // to where it was (or would be) read.
  std::optional<std::string> (*readRef)(const Json& document, std::string& refPath,
                                        Diagnostics& diagnostics) = nullptr;
  // When building the plugins for this slot alone, warn about plugins of other types.
  bool warnOtherTypes = false;
};

// resolvePluginRef with the slot's default and kind.
template <class Interface>
std::shared_ptr<Interface> resolvePluginRef(
    const PluginSlot<Interface>& slot, const std::optional<std::string>& ref,
    const std::string& refPath,
    const std::map<std::string, std::shared_ptr<Interface>, std::less<>>& built,
    const std::vector<PluginSpec>& specs, const PluginRegistry<Interface>& registry,
    Diagnostics& diagnostics) {
  return resolvePluginRef(ref, refPath, slot.defaultName, built, specs, registry, slot.kind,
                          diagnostics, slot.makeDefault);
}

// The plugin `slot` selects in `document`: a single plugin object built with `registry`, or in
// an EndpointPickerConfig the plugin its ref names (every plugin of a registered type is built
// and checked, and the ref is checked even when a plugin was invalid, so that every problem is
// reported at once), or the slot's default.
template <class Interface>
Result<std::shared_ptr<Interface>> loadPlugin(const Json& document,
                                              const PluginRegistry<Interface>& registry,
                                              const PluginSlot<Interface>& slot) {
  using Out = Result<std::shared_ptr<Interface>>;
  if (auto single = loadSinglePlugin(document, registry)) return std::move(*single);
  Diagnostics diagnostics;
  const std::vector<PluginSpec> specs = readPluginList(document, diagnostics);
  const auto built = buildPlugins(specs, registry, diagnostics,
                                  slot.warnOtherTypes ? slot.kind : std::string_view{});
  std::string ref_path;
  const auto ref = slot.readRef(document, ref_path, diagnostics);
  auto plugin = resolvePluginRef(slot, ref, ref_path, built, specs, registry, diagnostics);
  if (diagnostics.hasErrors() || plugin == nullptr) return Out::failure(std::move(diagnostics));
  return Out(std::move(plugin), std::move(diagnostics));
}

}  // namespace config
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/config/plugin-inl.hpp"
#endif
