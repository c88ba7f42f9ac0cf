// SaturationDetector: how full the pool is, and which endpoints may take more work.
//
// The host fills an Endpoint snapshot (holdback/core/endpoint.hpp) per model server from its own
// telemetry (scraped vLLM metrics, in-flight counters, ...) and hands a span of them, plus `now`
// from its own clock, to the detector. Detectors never read the system clock, never allocate in
// steady state and never throw.
//
//   saturation(endpoints, now)  aggregate pool saturation: < 1.0 is the fraction of capacity in
//                               use, >= 1.0 is saturated, > 1.0 measures overload (not clamped).
//                               Always finite and >= 0. An empty pool reads 1.0.
//   filter(endpoints, now, out) which endpoints a scheduler may still route to; writes their
//                               indices into `out` and says whether it failed open.
//
// Thread safety: implementations are thread-safe (saturation and filter may be called
// concurrently).
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "holdback/core/endpoint.hpp"
#include "holdback/core/types.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

struct FilterResult {
  // Number of indices written to `out`.
  std::size_t kept = 0;
  // True when no endpoint passed and the original list was returned instead.
  bool failOpen = false;
};

class HOLDBACK_API SaturationDetector {
 public:
  virtual ~SaturationDetector() = default;
  SaturationDetector(const SaturationDetector&) = delete;
  SaturationDetector& operator=(const SaturationDetector&) = delete;

  [[nodiscard]] virtual double saturation(std::span<const Endpoint> endpoints,
                                          TimePoint now) const noexcept = 0;

  // Writes the indices (into `endpoints`) of the endpoints that may take more work into `out`,
  // in order. `out` should hold endpoints.size() elements; at most out.size() are written.
  virtual FilterResult filter(std::span<const Endpoint> endpoints, TimePoint now,
                              std::span<std::size_t> out) const noexcept = 0;

  [[nodiscard]] virtual std::string_view type() const noexcept = 0;
  [[nodiscard]] std::string_view name() const noexcept { return name_; }

 protected:
  explicit SaturationDetector(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
