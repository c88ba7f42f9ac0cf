// holdback: the command-line tool. See `holdback --help`.
#include <iostream>
#include <string_view>

#include "common.hpp"

namespace {

constexpr std::string_view kMainHelp =
    R"(holdback - priority-aware admission control for LLM gateways

Usage: holdback COMMAND [OPTIONS]

Commands:
  ceilings   compute the admission ceiling of every priority with a usage limit policy
  validate   check a whole EndpointPickerConfig (or one plugin object), reporting every problem
  saturation  run a saturation detector over an endpoint snapshot (saturation, filter)
  simulate   simulate a gateway and a pool of LLM servers under prioritized traffic, once per
             policy arm, driving the real flow controller (the main job; see docs/simulation.md)
  eviction-bench  upstream's in-flight eviction benchmark shapes against the flow controller
             (docs/guide/eviction.md)

Run 'holdback COMMAND --help' for the options of a command.

Exit codes: 0 success, 1 invalid input file (every problem is printed), 2 usage error.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace holdback::cli;
  if (argc < 2) {
    std::cerr << kMainHelp;
    return kExitUsage;
  }
  const std::string_view command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kMainHelp;
    return kExitOk;
  }
  if (command == "ceilings") return runCeilings(argc, argv);
  if (command == "validate") return runValidate(argc, argv);
  if (command == "saturation") return runSaturation(argc, argv);
  if (command == "simulate") return runSimulate(argc, argv);
  if (command == "eviction-bench") return runEvictionBench(argc, argv);
  std::cerr << "holdback: unknown command \"" << command << "\"\n\n" << kMainHelp;
  return kExitUsage;
}
