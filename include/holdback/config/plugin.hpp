// Plugins: the {"type", "name", "parameters"} objects of an EndpointPickerConfig, and a registry
// that maps a type name to a factory so a host can add its own types beside the built-in ones.
//
// Thread safety: PluginRegistry is thread-compatible (register everything before sharing it;
// concurrent create() calls on an unchanging registry are safe).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdback/config/json.hpp"
#include "holdback/diagnostics.hpp"

namespace holdback::config {

struct PluginSpec {
  std::string type;
  std::string name;                  // defaults to the type
  const Json* parameters = nullptr;  // null when absent
  std::string path;                  // JSON pointer of the plugin object ("" for a whole file)

  [[nodiscard]] std::string parametersPath() const { return path + "/parameters"; }
};

// Reads a plugin object at `path`. Reports a missing or non-string "type", a non-string "name",
// and unknown keys. Returns nullopt when the object cannot describe a plugin.
std::optional<PluginSpec> readPluginSpec(const Json& plugin, const std::string& path,
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

}  // namespace holdback::config
