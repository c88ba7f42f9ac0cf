// The reports of `holdback simulate`: the text table, the CSV files and the gnuplot script of one
// seed's runs (see docs/simulation.md for the columns).
//
// Thread safety: pure functions.
#pragma once

#include "holdback/abi.hpp"

#include <string>
#include <vector>

#include "sim/simulator.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

// The table `holdback simulate` prints (fixed formatting: same results, same text).
[[nodiscard]] std::string formatTable(const Scenario& scenario, const std::vector<ArmResult>& arms);

// CSV text: one row per request (arm,class,...) and one row per interval sample.
[[nodiscard]] std::string requestsCsv(const Scenario& scenario, const std::vector<ArmResult>& arms);
[[nodiscard]] std::string intervalsCsv(const Scenario& scenario,
                                       const std::vector<ArmResult>& arms);
// The empirical TTFT distribution of each class and arm (requests measured and served), sorted:
// arm,class,ttft_ms,fraction.
[[nodiscard]] std::string ttftCdfCsv(const Scenario& scenario, const std::vector<ArmResult>& arms);
// A summary row per arm, class and window (the table as CSV).
[[nodiscard]] std::string summaryCsv(const std::vector<ArmResult>& arms);

// A gnuplot script that, run in the directory holding intervals.csv and ttft-cdf.csv, renders
// saturation-<detector>.png (saturation over time per arm), bands-<arm>.png (each band's ceiling
// and gateway queue depth over time) and ttft-cdf-<detector>-<class>.png (TTFT CDF per arm).
[[nodiscard]] std::string gnuplotScript(const Scenario& scenario,
                                        const std::vector<ArmResult>& arms);

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
