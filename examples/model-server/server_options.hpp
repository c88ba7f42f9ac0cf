// The command line of holdback-model-server (docs/model-server.md).
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
