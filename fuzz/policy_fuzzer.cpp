// computeLimit of every built-in strategy with arbitrary options, saturation and priorities:
// ceilings must be finite, within [0, 1] and non-increasing, whatever the input.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "check.hpp"
#include "holdback/policy/policies.hpp"

namespace {

using holdback::fuzz::Input;

std::unique_ptr<holdback::UsageLimitPolicy> makePolicy(Input& in) {
  using namespace holdback;
  switch (in.take<std::uint8_t>() % 4) {
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
  }
  return 0;
}
