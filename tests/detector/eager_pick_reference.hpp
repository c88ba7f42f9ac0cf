// The EndpointPicker's rule as endpoint_picker.hpp states it, read eagerly (the picker's first
// implementation): the whole pool's filter and room, then one pass over the candidates by the
// tuple of rules 2-6 (rule 2's endpoints that cannot hold the request last, and the whole pool
// when no candidate can; with `above`, the priority counts of rule 4a before the counts in flight;
// pools of one slot count only, where per slot is the counts' order). The picker's tests compare
// its picks, cursor included, with this one's.
// Shared by the picker's equivalence tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "holdback/detector/saturation_detector.hpp"

namespace holdback::test_support {

class EagerPickerReference {
 public:
  std::optional<std::size_t> pick(std::span<const Endpoint> endpoints,
                                  const SaturationDetector& detector, TimePoint now,
                                  std::span<const std::uint8_t> up, std::int64_t startTokens,
                                  bool fitFirst, std::span<const std::int64_t> above = {}) {
    const std::size_t n = endpoints.size();
    if (n == 0) return std::nullopt;
    std::vector<std::size_t> candidates(n);
    std::size_t kept = detector.filter(endpoints, now, candidates).kept;
    if (kept == 0) {
      for (std::size_t i = 0; i < n; ++i) candidates[i] = i;
      kept = n;
    }
    const bool useUp = up.size() >= n;
    if (cursor_ >= n) cursor_ = 0;
    const double tokens = startTokens > 0 ? static_cast<double>(startTokens) : 0.0;
    std::vector<EndpointRoom> room(n);
    const bool fit = fitFirst && detector.room(endpoints, now, room);
    auto cannotHold = [&](std::size_t i) {
      return startTokens > 0 && endpoints[i].kvCapacityTokens > 0 &&
             startTokens > endpoints[i].kvCapacityTokens;
    };
    auto key = [&](std::size_t i) {
      const bool down = useUp && up[i] == 0;
      const bool waits = fit && !(room[i].slots >= 1.0 && room[i].kvTokens >= tokens);
      const std::size_t distance = i >= cursor_ ? i - cursor_ : i + n - cursor_;
      const std::int64_t priorityLoad = above.size() >= n ? above[i] : 0;
      const double waiting = std::isnan(endpoints[i].waitingQueueSize)
                                 ? std::numeric_limits<double>::infinity()
                                 : endpoints[i].waitingQueueSize;  // unknown: after every known
      return std::make_tuple(cannotHold(i), down, waits, priorityLoad,
                             endpoints[i].inFlightRequests, waiting, distance);
    };
    auto bestOf = [&](std::span<const std::size_t> among) {
      std::size_t best = among[0];
      auto bestKey = key(best);
      for (std::size_t k = 1; k < among.size(); ++k) {
        const auto candidate = key(among[k]);
        if (candidate < bestKey) {
          best = among[k];
          bestKey = candidate;
        }
      }
      return best;
    };
    std::size_t best = bestOf(std::span<const std::size_t>(candidates.data(), kept));
    if (cannotHold(best)) {  // an endpoint that can hold it, filtered out or not
      std::vector<std::size_t> all(n);
      for (std::size_t i = 0; i < n; ++i) all[i] = i;
      if (const std::size_t any = bestOf(all); !cannotHold(any)) best = any;
    }
    cursor_ = best + 1 == n ? 0 : best + 1;
    return best;
  }

 private:
  std::size_t cursor_ = 0;
};

}  // namespace holdback::test_support
