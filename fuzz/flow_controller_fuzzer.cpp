// The flow controller under arbitrary sequences of enqueue, cancel, dispatchCycle, expire,
// desired-priority updates, pool changes, clock jumps (forward and backward), saturation values
// (NaN and infinities included) and shutdown. Checks: every request handed to enqueue() ends
// with exactly one outcome, delivered once; nothing is queued after shutdown; the stats'
// outcome counters add up to the outcomes delivered.
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "check.hpp"
#include "holdback/flow_controller.hpp"
#include "holdback/policies.hpp"

namespace {

using namespace holdback;

using holdback::fuzz::Input;

class FakeDetector final : public SaturationDetector {
 public:
  FakeDetector() : SaturationDetector("fuzz") {}
  double saturation(std::span<const Endpoint> endpoints, TimePoint) const noexcept override {
    return endpoints.empty() ? 1.0 : value;
  }
  FilterResult filter(std::span<const Endpoint> endpoints, TimePoint,
                      std::span<std::size_t> out) const noexcept override {
    std::size_t n = 0;
    for (; n < endpoints.size() && n < out.size(); ++n) out[n] = n;
    return {n, false};
  }
  std::string_view type() const noexcept override { return "fuzz"; }
  double value = 0.0;  // written only between controller calls (single-threaded fuzzer)
};

class FakePool final : public EndpointSource {
 public:
  std::span<const Endpoint> endpoints(TimePoint) noexcept override { return pool; }
  std::vector<Endpoint> pool;
};

constexpr Priority kPriorities[] = {0,
                                    1,
                                    -1,
                                    100,
                                    50,
                                    -50,
                                    std::numeric_limits<Priority>::max(),
                                    std::numeric_limits<Priority>::min()};
constexpr double kSaturations[] = {0.0,
                                   0.3,
                                   0.55,
                                   0.7,
                                   0.95,
                                   1.0,
                                   1.5,
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -1.0};

std::shared_ptr<UsageLimitPolicy> makePolicy(std::uint8_t kind) {
  switch (kind % 3) {
    case 0:
      return std::move(PriorityHoldbackPolicy::create(
                           {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.4}))
          .value();
    case 1:
      return std::move(SoftReflectiveCeilingPolicy::create()).value();
    default:
      return std::move(StaticUsageLimitPolicy::create()).value();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  auto detector = std::make_shared<FakeDetector>();
  auto pool = std::make_shared<FakePool>();
  pool->pool.resize(in.byte() % 3);
  std::map<RequestId, int> outcomes;  // id -> times delivered
  std::uint64_t delivered = 0;

  FlowControllerOptions options;
  options.policy = makePolicy(in.byte());
  options.detector = detector;
  options.endpoints = pool;
  options.onOutcome = [&](Completion&& c) {
    ++outcomes[c.id];
    ++delivered;
  };
  const std::uint8_t flags = in.byte();
  options.priorityDomain = (flags & 1) ? PriorityDomain::kActive : PriorityDomain::kProvisioned;
  options.provisionOnFirstUse = (flags & 2) != 0;
  options.maxBands = 1 + in.byte() % 6;
  options.maxRequests = in.byte() % 12;
  options.maxBytes = (flags & 4) ? in.byte() * 16u : 0;
  options.defaultBand.maxRequests = in.byte() % 8;
  options.defaultRequestTtl = std::chrono::milliseconds(in.byte() % 50);
  if (flags & 8) options.noEndpointRequestTtl = std::chrono::milliseconds(in.byte() % 50);
  options.flowIdleTimeout = std::chrono::milliseconds(1 + in.byte() % 20);
  options.bandIdleTimeout = options.flowIdleTimeout + std::chrono::milliseconds(in.byte() % 20);
  if (flags & 16) options.bands.push_back({.priority = 100, .maxRequests = 3});
  auto made = FlowController::create(std::move(options));
  if (!made) return 0;  // rejected options are fine
  std::unique_ptr<FlowController> controller = std::move(made).value();

  TimePoint now{};
  std::vector<Ticket> tickets;
  std::uint64_t enqueued = 0;
  bool stopped = false;
  for (int step = 0; step < 2000 && !in.empty(); ++step) {
    switch (in.byte() % 10) {
      case 0:
      case 1: {
        FlowRequest request;
        const std::uint8_t f = in.byte();
        request.flowId =
            (f % 5 == 4) ? std::string() : std::string(1, static_cast<char>('a' + f % 5));
        request.priority = kPriorities[in.byte() % std::size(kPriorities)];
        request.sizeBytes = in.byte();
        const std::uint8_t t = in.byte();
        if (t & 1) request.ttl = std::chrono::milliseconds(static_cast<int>(t) - 64);
        if (t & 2) request.deadline = now + std::chrono::milliseconds(static_cast<int>(t) - 100);
        tickets.push_back(controller->enqueue(std::move(request), now));
        ++enqueued;
        break;
      }
      case 2:
        if (!tickets.empty()) tickets[in.byte() % tickets.size()].cancel();
        break;
      case 3:
      case 4:
        controller->dispatchCycle(now);
        break;
      case 5:
        controller->expire(now);
        break;
      case 6: {
        const std::uint8_t j = in.byte();
        now += (j & 0x80) ? -std::chrono::milliseconds(j & 0x0F) : std::chrono::milliseconds(j);
        break;
      }
      case 7:
        detector->value = kSaturations[in.byte() % std::size(kSaturations)];
        break;
      case 8: {
        std::vector<Priority> desired;
        for (int n = in.byte() % 4; n > 0; --n) {
          desired.push_back(kPriorities[in.byte() % std::size(kPriorities)]);
        }
        controller->setDesiredPriorities(desired);
        break;
      }
      case 9:
        if (in.byte() % 8 == 0) {
          controller->shutdown(now);
          stopped = true;
        } else {
          pool->pool.resize(in.byte() % 3);
        }
        break;
    }
    if (stopped) {
      holdback::fuzz::require(controller->stats().queuedRequests == 0,
                              "nothing is queued after shutdown");
    }
  }
  controller->shutdown(now);
  const FlowControllerStats stats = controller->stats();
  holdback::fuzz::require(stats.queuedRequests == 0, "shutdown empties every queue");
  holdback::fuzz::require(delivered == enqueued, "every request gets an outcome");
  for (const auto& [id, count] : outcomes) {
    holdback::fuzz::require(count == 1, "each outcome is delivered exactly once");
  }
  holdback::fuzz::require(outcomes.size() == enqueued, "outcomes belong to distinct requests");
  std::uint64_t counted = 0;
  for (const std::uint64_t n : stats.outcomes) counted += n;
  holdback::fuzz::require(counted == delivered, "stats count every outcome");
  return 0;
}
