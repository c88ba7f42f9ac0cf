// holdback eviction-bench: upstream's eviction benchmark shapes (PR #2107) against the flow
// controller's in-flight eviction (src/sim/eviction_bench.hpp).
#include <iostream>

#include "common.hpp"
#include "sim/eviction_bench.hpp"

namespace holdback::cli {
namespace {

constexpr std::string_view kEvictionBenchHelp = R"(Usage: holdback eviction-bench

Runs upstream's in-flight eviction benchmark shapes (a pool of 20 units preloaded with 20
sheddable leases, ceiling 0.9; bursts single / batch32 / sustained; graces 5, 50, 200, 500 ms;
in-flight and lagging (200 ms) sensors; baselines without eviction, with 500 ms natural churn,
and wait-vs-evict) against the real FlowController on a millisecond-stepped clock, and prints a
Markdown table: time to first relief, last admission, high-priority waits, revocations against
the analytic minimum, goodput. Deterministic: same binary, same table. See docs/guide/eviction.md.
)";

}  // namespace

int runEvictionBench(int argc, char** argv) {
  Args args;
  if (auto error = parseArgs(argc, argv, 2, {}, args)) return usageError("eviction-bench", *error);
  if (args.help) {
    std::cout << kEvictionBenchHelp;
    return kExitOk;
  }
  if (!args.positional.empty()) return usageError("eviction-bench", "takes no arguments");
  const std::vector<sim::EvictionBenchCase> cases = sim::evictionBenchMatrix();
  std::vector<sim::EvictionBenchResult> results;
  results.reserve(cases.size());
  for (const sim::EvictionBenchCase& c : cases) results.push_back(sim::runEvictionBench(c));
  std::cout << sim::formatEvictionBenchTable(cases, results);
  return kExitOk;
}

}  // namespace holdback::cli
