// Whole config files, JSON or YAML: parsing and every loader (the policy loader, the detector
// loader and the whole-file EndpointPickerConfig loader) must never crash, hang or throw; what
// they build must work:
//   - a policy that loads produces valid ceilings;
//   - a detector that loads gives a finite saturation >= 0;
//   - a bundle that loads builds a FlowController once the host adds its callbacks (the loader
//     accepts nothing create() rejects),
//     the controller runs a few requests to one outcome each, and the same bundle hot-reloads
//     into it (applyBundle) without errors.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "holdback/config/detector_config.hpp"
#include "holdback/config/document.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/config/policy_config.hpp"

namespace {

using namespace holdback;
using holdback::fuzz::require;

void checkPolicy(UsageLimitPolicy& policy) {
  const std::vector<Priority> priorities{2147483647, 100, 50, 0, -1, -2147483647 - 1};
  std::vector<double> ceilings(priorities.size(), 1.0);
  for (const double s : {0.0, 0.5, 0.75, 1.0, 2.0}) {
    policy.computeLimit(s, priorities, ceilings);
    fuzz::requireValidCeilings(ceilings);
  }
}

std::vector<Endpoint> somePool() {
  std::vector<Endpoint> pool(3);
  pool[0].updateTime = TimePoint{};
  pool[0].waitingQueueSize = 2;
  pool[0].kvCacheUsage = 0.5;
  pool[0].inFlightRequests = 7;
  pool[1].updateTime = TimePoint{};
  pool[1].waitingQueueSize = 40;
  pool[1].kvCacheUsage = 0.99;
  pool[1].inFlightTokens = 1000;
  pool[1].role = EndpointRole::kPrefill;
  return pool;  // pool[2] has no metrics yet
}

void checkDetector(const SaturationDetector& detector) {
  const std::vector<Endpoint> pool = somePool();
  const double s = detector.saturation(pool, TimePoint{});
  require(std::isfinite(s) && s >= 0.0, "a loaded detector's saturation is finite and >= 0");
}

void checkBundle(const config::ConfigBundle& bundle) {
  (void)config::describeBundle(bundle);
  checkPolicy(*bundle.policy);
  checkDetector(*bundle.detector);
  FlowControllerOptions options = bundle.controller;
  options.endpoints = std::make_shared<VectorEndpointSource>(somePool());
  int delivered = 0;
  options.onOutcome = [&](Completion&&) { ++delivered; };
  options.eviction.evict = [](const Revocation&) {};  // the host's actuator (enableEviction)
  auto made = FlowController::create(std::move(options));
  require(made.ok(), "a loaded bundle builds a FlowController");
  FlowController& controller = *made.value();
  TimePoint now{};
  for (const Priority p : {0, 100, -5, 2147483647}) {
    controller.enqueue({.flowId = "f", .priority = p, .sizeBytes = 100}, now);
  }
  for (int i = 0; i < 3; ++i) controller.dispatchCycle(now += std::chrono::milliseconds(10));
  require(!config::applyBundle(controller, bundle).hasErrors(),
          "a loaded bundle hot-reloads into a controller built from it");
  controller.expire(now += std::chrono::hours(1));
  controller.shutdown(now);
  require(delivered == 4, "every request gets one outcome");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = config::parseDocument(text);
  if (!document.ok()) {
    require(document.diagnostics().hasErrors(), "a failed parse reports an error");
    return 0;
  }
  const config::Json& json = document.value().json;
  static const config::Registries registries;

  const auto policy = config::loadUsageLimitPolicy(json, registries.policies);
  (void)config::withPositions(policy.diagnostics(), document.value().positions);
  if (policy.ok()) {
    checkPolicy(*policy.value());
  } else {
    require(policy.diagnostics().hasErrors(), "a failed policy load reports an error");
  }

  const auto detector = config::loadSaturationDetector(json, registries.detectors);
  if (detector.ok()) {
    checkDetector(*detector.value());
  } else {
    require(detector.diagnostics().hasErrors(), "a failed detector load reports an error");
  }

  if (config::isEndpointPickerConfig(json)) {
    const auto bundle = config::loadEndpointPickerConfig(document.value(), registries);
    if (bundle.ok()) {
      checkBundle(*bundle.value());
    } else {
      require(bundle.diagnostics().hasErrors(), "a failed load reports an error");
    }
  }
  return 0;
}
