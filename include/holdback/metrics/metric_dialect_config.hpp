// Custom metric dialects from a JSON document (the example gateway's --dialect-file), for engines
// or deployments the built-in dialects (holdback/metrics/metric_dialect.hpp) do not cover:
//
//   {"dialects": [
//     {"name": "my-engine",
//      "waiting": "my_engine_queue_depth",
//      "running": ["my_engine_running", "my_engine_active"],
//      "kvUsage": "my_engine_kv_used_blocks / my_engine_kv_total_blocks",
//      "required": ["waiting", "kvUsage"]}]}
//
// Each quantity key (waiting, running, kvUsage, kvCapacityTokens, slots) takes a spec string or
// an array of them (tried in order; the spec grammar is parseMetricSource's). "required" defaults
// to every quantity named; "waiting" must be named. Names must be non-empty, unique within the
// document and differ from the built-in dialects' and from "auto" and "custom".
//
// Every problem is reported with its JSON path ("/dialects/0/kvUsage/1: ..."); the result holds
// the dialects only when there was none. Never throws.
//
// Thread safety: thread-safe (pure function).
#pragma once

#include "holdback/abi.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "holdback/metrics/metric_dialect.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct MetricDialectsLoad {
  std::vector<MetricDialect> dialects;  // empty when `errors` is not
  std::vector<std::string> errors;      // each "<JSON path>: <what is wrong>"

  [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

[[nodiscard]] HOLDBACK_API MetricDialectsLoad parseMetricDialects(std::string_view json);

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/metrics/metric_dialect_config-inl.hpp"
#endif
