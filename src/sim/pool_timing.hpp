// The pool model's service times and admission rule, shared by the simulator (src/sim/
// pool_model.cpp) and the fake model server's pool mode (examples/model-server/step_engine.hpp),
// so one scenario's pool section describes both runtimes (docs/guide/replay.md).
//
//   prefill(input)  = prefillBaseMs + prefillPerTokenMs x input       (admission -> first token)
//   tpot(running)   = tpotBaseMs + tpotPerRunningMs x running        (one decode step of the batch)
//   admits          = running < slots and (running == 0 or kvInUse + input <= kvCapacityTokens)
//
// KV held by a running sequence: its input plus the tokens generated after the first (one more per
// decode step), freed when it leaves the batch. A sequence alone on its server always runs, even
// when its input exceeds the capacity.
//
// Thread safety: plain values; the functions are pure. Header-only, so the example programs can
// include it without linking the simulator.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <cstdint>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

struct PoolTiming {
  double prefillBaseMs = 5.0;
  double prefillPerTokenMs = 0.05;
  double tpotBaseMs = 5.0;
  double tpotPerRunningMs = 0.25;

  // Milliseconds from admission to the first token of a sequence of `input` prompt tokens.
  [[nodiscard]] constexpr double prefillMs(std::int64_t input) const noexcept {
    return prefillBaseMs + prefillPerTokenMs * static_cast<double>(input);
  }
  // Milliseconds of one decode step of a batch of `running` sequences.
  [[nodiscard]] constexpr double tpotMs(std::size_t running) const noexcept {
    return tpotBaseMs + tpotPerRunningMs * static_cast<double>(running);
  }
};

// Whether the head of a server's FIFO queue, `input` prompt tokens, starts now.
[[nodiscard]] constexpr bool admitsHead(std::size_t running, std::int64_t slots,
                                        std::int64_t kvInUse, std::int64_t input,
                                        std::int64_t kvCapacityTokens) noexcept {
  return static_cast<std::int64_t>(running) < slots &&
         (running == 0 || kvInUse + input <= kvCapacityTokens);
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
