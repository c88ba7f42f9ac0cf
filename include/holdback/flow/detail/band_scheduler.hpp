// detail::BandScheduler: the order in which one dispatch cycle tries the bands of its priority
// domain (flow/band_scheduling.hpp has the algorithm, the weights and the starvation bound).
// Internal.
//
// Use, under the controller's lock, once per cycle: plan() after the ceilings are computed, then
// at(k) for k = 0, 1, ... instead of the band index k, and dispatched(i) when band i dispatched.
// With strict priority, or in a cycle below the activation threshold, at(k) == k and
// dispatched() does nothing. In an active cycle at(0..) lists the candidates (non-empty bands
// above the first gated band) by ascending pass, then every other index in natural order: the
// cycle's own gate check and head-of-line break are untouched, so a gated band is never
// dispatched and the cycle stops where strict priority would.
//
// Cost: O(bands) per active cycle plus an insertion sort of the candidates (O(bands^2) worst
// case, bands <= maxBands); nothing for a strict cycle. No allocation once reserve() has seen the
// band count; no exception; no host code.
//
// Thread safety: thread-compatible (the controller's mutex guards it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "holdback/flow/band_scheduling.hpp"
#include "holdback/flow/options.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace detail {

struct Band;

// FlowController::validate's checks of the scheduling options and band weights.
void validateBandSchedulingOptions(const FlowControllerOptions& options, Diagnostics& diagnostics);

class BandScheduler {
 public:
  // The reloadable settings, taken from the options (cold path: allocates).
  struct Config {
    BandSchedulingOptions options;
    // Every declared band's (priority, weight), sorted by priority.
    std::vector<std::pair<Priority, double>> declared;
    double defaultWeight = 0.0;
    std::optional<double> negativeWeight;
    static Config of(const FlowControllerOptions& options);
    // The weight of the band at `position` (0 = highest) of `bands` domain bands.
    [[nodiscard]] double weightOf(Priority p, std::size_t position,
                                  std::size_t bands) const noexcept;
  };
  // The pass unit: a band of weight w advances by kPassScale / w per dispatch.
  static constexpr std::uint64_t kPassScale = std::uint64_t{1} << 48;

  void reserve(std::size_t bands) { order_.reserve(bands); }
  // `domain` (highest first) and `ceilings` are the cycle's; `all` every band of the table (for
  // the rare rebasing of the passes).
  void plan(const Config& config, double saturation, std::span<Band* const> domain,
            std::span<const double> ceilings, std::span<Band* const> all) noexcept {
    active_ = config.options.schedule == BandSchedule::kWeightedFair &&
              saturation >= config.options.activationThreshold;  // NaN: never active
    if (active_) planActive(config, saturation, domain, ceilings, all);
  }
  [[nodiscard]] bool active() const noexcept { return active_; }
  [[nodiscard]] std::size_t at(std::size_t k) const noexcept { return active_ ? order_[k] : k; }
  void dispatched(std::size_t i) noexcept {
    if (active_) advance(i);
  }
  [[nodiscard]] std::uint64_t virtualTime() const noexcept { return virtual_time_; }

 private:
  void planActive(const Config& config, double saturation, std::span<Band* const> domain,
                  std::span<const double> ceilings, std::span<Band* const> all) noexcept;
  void advance(std::size_t i) noexcept;
  void rebase(std::span<Band* const> all) noexcept;

  const Config* config_ = nullptr;  // the plan's, for dispatched()
  std::span<Band* const> domain_;
  std::vector<std::size_t> order_;
  std::uint64_t virtual_time_ = 0;
  bool active_ = false;
};

}  // namespace detail
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
