// computeLimit of every built-in strategy with arbitrary options, saturation and priorities (and,
// for the reservation policy, arbitrary demand figures): ceilings must be finite, within [0, 1]
// and non-increasing, whatever the input.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "check.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/policy/reservation.hpp"

namespace {

using holdback::fuzz::Input;

std::unique_ptr<holdback::UsageLimitPolicy> makePolicy(Input& in) {
  using namespace holdback;
  // Kinds 250-255 are the reservation policy (added later: the older corpus keeps its meaning).
  const auto kind = in.take<std::uint8_t>();
  if (kind >= 250) {
    ReservationOptions options;
    options.epsilon = in.take<double>();
    options.minCeiling = in.take<double>();
    options.maxCeiling = in.take<double>();
    options.minReserve = in.take<double>();
    if (in.take<std::uint8_t>() % 2) options.requestUnit = in.take<double>();
    options.sizing =
        in.take<std::uint8_t>() % 2 ? ReservationSizing::kRefill : ReservationSizing::kOccupancy;
    options.poissonSizing = in.take<std::uint8_t>() % 4 != 0;
    options.feedback.enabled = in.take<std::uint8_t>() % 2;
    options.minReserveShare = in.take<double>();  // last: the older corpus keeps its meaning
    options.feedback.interval = std::chrono::nanoseconds(1);
    auto made = ReservationPolicy::create(std::move(options));
    if (made) return std::move(made).value();
    return nullptr;
  }
  switch (kind % 4) {
    case 0: {
      auto made = StaticUsageLimitPolicy::create({.threshold = in.take<double>()});
      if (made) return std::move(made).value();
      return nullptr;
    }
    case 1:
      return std::move(SoftReflectiveCeilingPolicy::create()).value();
    default: {
      PriorityHoldbackOptions options;
      options.strategy = static_cast<HoldbackStrategy>(in.take<std::uint8_t>() % 4);
      options.minCeiling = in.take<double>();
      options.maxCeiling = in.take<double>();
      options.sigmoidSteepness = in.take<double>();
      options.sigmoidMidpoint = in.take<double>();
      options.sigmoidDomain =
          in.take<std::uint8_t>() % 2 ? SigmoidDomain::kValue : SigmoidDomain::kRank;
      const std::size_t entries = in.take<std::uint8_t>() % 8;
      for (std::size_t i = 0; i < entries; ++i) {
        options.ceilings.push_back({in.take<Priority>(), in.take<double>()});
      }
      if (in.take<std::uint8_t>() % 2) options.defaultCeiling = in.take<double>();
      auto made = PriorityHoldbackPolicy::create(std::move(options));
      if (made) return std::move(made).value();
      return nullptr;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace holdback;
  Input in(data, size);
  auto policy = makePolicy(in);
  if (policy == nullptr) return 0;  // invalid options are rejected by create(): fine
  for (int call = 0; call < 4 && !in.empty(); ++call) {
    const double saturation = in.take<double>();
    const std::size_t n = in.take<std::uint8_t>() % 64;
    std::vector<Priority> priorities;
    for (std::size_t i = 0; i < n; ++i) priorities.push_back(in.take<Priority>());
    const std::size_t buffer = (in.take<std::uint8_t>() % 2) ? n : n / 2;
    std::vector<double> ceilings(buffer, 1.0);
    policy->computeLimit(saturation, priorities, ceilings);
    fuzz::requireValidCeilings(ceilings);
    if (!policy->usesDemand()) continue;
    // The same with a demand view: any figures, aligned with the priorities or too short.
    std::vector<BandDemand> bands(in.take<std::uint8_t>() % 2 ? n : n / 2);
    for (BandDemand& b : bands) {
      b = {.occupancy = in.take<double>(),
           .arrivalRate = in.take<double>(),
           .holdingTime = in.take<double>(),
           .inFlight = in.take<double>(),
           .queued = in.take<double>(),
           .waitP95 = in.take<double>(),
           .completionRate = in.take<double>()};
    }
    const DemandView view{.bands = bands,
                          .requestUnit = in.take<double>(),
                          .now = std::chrono::steady_clock::time_point(
                              std::chrono::nanoseconds(in.take<std::int64_t>()))};
    std::fill(ceilings.begin(), ceilings.end(), 1.0);
    policy->computeLimit(saturation, priorities, ceilings, view);
    fuzz::requireValidCeilings(ceilings);
  }
  return 0;
}
