// Implementation of holdback/metrics/metric_dialect_config.hpp: compiled into libholdback by
// src/metrics.cpp, or included by the header itself in header-only mode (HOLDBACK_HEADER_ONLY).
#pragma once

#include "holdback/metrics/metric_dialect_config.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE MetricDialectsLoad parseMetricDialects(std::string_view json) {
  MetricDialectsLoad out;
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    out.errors.emplace_back(": not valid JSON");
    return out;
  }
  if (!doc.is_object() || !doc.contains("dialects") || !doc["dialects"].is_array()) {
    out.errors.emplace_back("/dialects: an array of dialects is required");
    return out;
  }
  const nlohmann::json& list = doc["dialects"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "/dialects/" + std::to_string(i);
    const nlohmann::json& entry = list[i];
    if (!entry.is_object()) {
      out.errors.push_back(path + ": an object is required");
      continue;
    }
    MetricDialect d;
    d.required = 0;
    bool named_required = false;
    for (const auto& [key, value] : entry.items()) {
      const std::string at = path + "/" + key;
      if (key == "name") {
        if (!value.is_string() || value.get<std::string>().empty()) {
          out.errors.push_back(at + ": a non-empty string is required");
          continue;
        }
        d.name = value.get<std::string>();
        const bool taken = d.name == "auto" || d.name == "custom" ||
                           findMetricDialect(d.name) != nullptr ||
                           std::any_of(out.dialects.begin(), out.dialects.end(),
                                       [&](const MetricDialect& o) { return o.name == d.name; });
        if (taken) out.errors.push_back(at + ": \"" + d.name + "\" is already a dialect's name");
      } else if (key == "required") {
        named_required = true;
        if (!value.is_array()) {
          out.errors.push_back(at + ": an array of quantity names is required");
          continue;
        }
        for (std::size_t k = 0; k < value.size(); ++k) {
          const auto q = value[k].is_string()
                             ? dialectQuantityFromString(value[k].get<std::string>())
                             : std::nullopt;
          if (!q) {
            out.errors.push_back(at + "/" + std::to_string(k) + ": " + value[k].dump() +
                                 " is not one of waiting, running, kvUsage, kvCapacityTokens, "
                                 "slots");
            continue;
          }
          d.required |= 1U << unsigned(*q);
        }
      } else if (const auto q = dialectQuantityFromString(key)) {
        const bool one = value.is_string();
        if (!one && !value.is_array()) {
          out.errors.push_back(at + ": a spec string or an array of them is required");
          continue;
        }
        const std::size_t n = one ? 1 : value.size();
        for (std::size_t k = 0; k < n; ++k) {
          const nlohmann::json& spec = one ? value : value[k];
          const std::string spec_at = one ? at : at + "/" + std::to_string(k);
          std::string error;
          auto src =
              spec.is_string() ? parseMetricSource(spec.get<std::string>(), &error) : std::nullopt;
          if (!src) {
            out.errors.push_back(spec_at + ": " +
                                 (spec.is_string() ? error : "a string is required"));
            continue;
          }
          d.sources[std::size_t(*q)].push_back(std::move(*src));
        }
      } else {
        out.errors.push_back(at +
                             ": unknown key (allowed: name, waiting, running, kvUsage, "
                             "kvCapacityTokens, slots, required)");
      }
    }
    if (d.name.empty() && !entry.contains("name")) out.errors.push_back(path + "/name: required");
    if (d.of(DialectQuantity::kWaiting).empty()) {
      out.errors.push_back(path + "/waiting: required (the queue holdback gates on)");
    }
    if (!named_required) {
      for (std::size_t q = 0; q < kDialectQuantityCount; ++q) {
        if (!d.sources[q].empty()) d.required |= 1U << unsigned(q);
      }
    } else {
      for (std::size_t q = 0; q < kDialectQuantityCount; ++q) {
        if (d.needs(DialectQuantity(q)) && d.sources[q].empty()) {
          out.errors.push_back(path + "/required: \"" + std::string(toString(DialectQuantity(q))) +
                               "\" is required but no metric is named for it");
        }
      }
    }
    out.dialects.push_back(std::move(d));
  }
  if (!out.errors.empty()) out.dialects.clear();
  return out;
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
