// Private to src/sim: the trace side of the scenario reader and the built-in trace scenarios
// (azure-code, azure-conv; docs/guide/traces.md). Not installed.
//
// Thread safety: as scenario.hpp (pure functions; trace files go through loadTrace's cache).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/config/json.hpp"
#include "sim/scenario.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// Reads a trace class's arrival keys (file, format, startSeconds, timeScale) and loads its trace,
// a relative file relative to `baseDirectory`; problems go to the reader's diagnostics.
void readTraceArrival(config::ParamReader& arrival, const std::string& baseDirectory,
                      ArrivalSpec& out);

// The most requests a trace class can send in `durationSeconds` from any start (the densest
// stretch of the looped trace at its time scale), for scenarioSizeError.
[[nodiscard]] double traceRequests(const ArrivalSpec& a, double durationSeconds);

// The built-in trace scenarios for scenarioCatalog().
[[nodiscard]] std::vector<CatalogEntry> traceCatalog();

// nullopt: `name` is no trace scenario. Otherwise whether it loaded (else `error` says why).
[[nodiscard]] std::optional<bool> findTraceScenario(std::string_view name, Scenario& out,
                                                    std::string& error);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
