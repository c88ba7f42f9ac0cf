// The command line of holdback-model-server (docs/guide/model-server.md).
//
// Thread safety: thread-compatible (parsed once by main).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace holdback_examples {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int slots = 8;
  int tokenMs = 20;
  int prefillMs = 50;
  std::int64_t kvCapacityTokens = 16384;
  // Pool mode (the simulator's pool model, src/sim/pool_timing.hpp): set by any of
  // --prefill-base-ms, --prefill-per-token-ms, --tpot-base-ms, --tpot-per-running-ms; the flags
  // left out keep the simulator's defaults.
  bool poolModel = false;
  double prefillBaseMs = 5.0;
  double prefillPerTokenMs = 0.05;
  double tpotBaseMs = 5.0;
  double tpotPerRunningMs = 0.25;
  std::string model = "fake-model";
  int threads = 256;
  // Misbehaviour for tests: when set, /metrics reports these instead of the real gauges.
  std::optional<double> fakeWaiting;
  std::optional<double> fakeKv;
  // The /metrics dialect (metric_dialects.hpp): vllm, vllm-v0, sglang, llamacpp, tgi, trtllm.
  std::string dialect = "vllm";
};

// Parses the flags into `o`. Returns the exit code for a usage error (2), 0 for --help, or
// nullopt to go on.
std::optional<int> parseArgs(int argc, char** argv, ServerOptions& o);

}  // namespace holdback_examples
