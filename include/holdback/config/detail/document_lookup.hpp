// Lookups in a loaded document for the passes that run after the plugins are built and change a
// default the file did not set (config/reference_profile-inl.hpp,
// config/detail/derived_defaults.hpp). Internal. Thread safety: pure functions. Cold path.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "holdback/config/json.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

// The value at `keys` below `object` (each an object key), or null.
inline const config::Json* documentFind(const config::Json* object,
                                        std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (object == nullptr || !object->is_object()) return nullptr;
    const auto it = object->find(key);
    if (it == object->end()) return nullptr;
    object = &*it;
  }
  return object;
}

// Whether `object` sets `key`.
inline bool documentSetsKey(const config::Json* object, std::string_view key) {
  return documentFind(object, {key}) != nullptr;
}

// The "parameters" object of the plugin named `name` in `document` (a plugin's name defaults to
// its type), or null.
inline const config::Json* documentPluginParameters(const config::Json& document,
                                                    std::string_view name) {
  const config::Json* plugins = documentFind(&document, {"plugins"});
  if (plugins == nullptr || !plugins->is_array()) return nullptr;
  for (const config::Json& p : *plugins) {
    if (!p.is_object()) continue;
    const config::Json* n = documentFind(&p, {"name"});
    if (n == nullptr || !n->is_string()) n = documentFind(&p, {"type"});
    if (n == nullptr || !n->is_string() || n->get<std::string>() != name) continue;
    const config::Json* params = documentFind(&p, {"parameters"});
    return params != nullptr && params->is_object() ? params : nullptr;
  }
  return nullptr;
}

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
