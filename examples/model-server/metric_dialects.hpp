// The fake model server's /metrics in the other engines' dialects (--dialect): the same scheduler
// state written with SGLang's, llama.cpp server's, TGI's or Triton TensorRT-LLM's metric names,
// labels and units, as those engines document them (docs/guide/engines.md), so the gateway can be
// run against each. "vllm" (the default) stays in model_server.cpp.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace holdback_examples {

// What every dialect is rendered from.
struct DialectGauges {
  std::string_view model;
  double waiting = 0.0;
  double running = 0.0;
  double kvCacheUsage = 0.0;  // fraction 0..1
  std::int64_t kvCapacityTokens = 0;
  int slots = 0;
};

// The --dialect values: vllm, vllm-v0, sglang, llamacpp, tgi, trtllm.
inline constexpr std::string_view kServerDialects[] = {"vllm",     "vllm-v0", "sglang",
                                                       "llamacpp", "tgi",     "trtllm"};
[[nodiscard]] bool isServerDialect(std::string_view name);

// The /metrics text of `dialect` (not "vllm": the caller renders that one itself).
[[nodiscard]] std::string renderDialectMetrics(std::string_view dialect, const DialectGauges& g);

}  // namespace holdback_examples
