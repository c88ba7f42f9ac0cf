// The gateway's declared KV footprints (footprint.hpp).
#include "footprint.hpp"

#include <cmath>
#include <cstdint>

namespace holdback::gateway {

std::unique_ptr<OutputEstimator> makeOutputEstimator() {
  auto created = OutputEstimator::create(
      {.quantile = 0.9, .fallbackTokens = CompletionBody::kDefaultMaxTokens, .minSamples = 8});
  return std::move(created).value();  // valid options: cannot fail
}

std::int64_t declaredFootprint(const CompletionBody& body, const OutputEstimator& learned,
                               Priority priority) {
  if (body.maxTokens > 0) return body.kvTokens();
  // estimate() is a whole number in [1, maxTokens] (1e6): exact in int64.
  const auto out = static_cast<std::int64_t>(learned.estimate(priority));
  return body.promptTokens > INT64_MAX - out ? INT64_MAX : body.promptTokens + out;
}

bool learnsFootprint(const CompletionBody& body, bool usageKnown, bool revoked) noexcept {
  return body.maxTokens <= 0 && usageKnown && !revoked;
}

}  // namespace holdback::gateway
