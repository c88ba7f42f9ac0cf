// Fakes shared by the flow controller tests: a scripted detector, a settable endpoint source and
// an outcome recorder. No clocks: tests pass `now` explicitly.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

// In the ABI namespace like the library's holdback::testing (holdback/abi.hpp), so that every
// test TU names the same types whatever it includes first.
namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace testing {

// Returns a settable saturation for any non-empty set and 1.0 for an empty one.
class FakeDetector final : public SaturationDetector {
 public:
  explicit FakeDetector(double value = 0.0) : SaturationDetector("fake"), value_(value) {}
  void set(double value) noexcept { value_.store(value); }
  double saturation(std::span<const Endpoint> endpoints, TimePoint) const noexcept override {
    calls.fetch_add(1);
    return endpoints.empty() ? 1.0 : value_.load();
  }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "fake"; }
  mutable std::atomic<int> calls{0};

 private:
  std::atomic<double> value_;
};

// A pool of `n` unlabeled endpoints (ep0, ep1, ...); setSize(0) empties it.
struct FakeEndpoints final : VectorEndpointSource {
  explicit FakeEndpoints(std::size_t n = 1) : VectorEndpointSource(named(n)) {}
  void setSize(std::size_t n) { set(named(n)); }
};

struct Recorded {
  RequestId id;
  std::string flowId;
  Priority requested;
  Priority band;
  Outcome outcome;
  TimePoint finalizedAt;
  int payload;  // -1 when the payload was not an int
};

class Recorder {
 public:
  std::function<void(Completion&&)> callback() {
    return [this](Completion&& c) {
      const int* p = std::any_cast<int>(&c.payload);
      std::lock_guard lock(mu_);
      all_.push_back({c.id, c.flowId, c.requestedPriority, c.bandPriority, c.outcome, c.finalizedAt,
                      p ? *p : -1});
    };
  }
  std::vector<Recorded> all() const {
    std::lock_guard lock(mu_);
    return all_;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return all_.size();
  }
  // Flow ids of the dispatched requests, in order.
  std::vector<std::string> dispatchedFlows() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& r : all_)
      if (r.outcome.dispatched()) out.push_back(r.flowId);
    return out;
  }
  std::vector<int> dispatchedPayloads() const {
    std::lock_guard lock(mu_);
    std::vector<int> out;
    for (const auto& r : all_)
      if (r.outcome.dispatched()) out.push_back(r.payload);
    return out;
  }
  void clear() {
    std::lock_guard lock(mu_);
    all_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<Recorded> all_;
};

inline FlowRequest request(std::string flow, Priority priority, int payload = 0,
                           std::uint64_t bytes = 0) {
  FlowRequest r;
  r.flowId = std::move(flow);
  r.priority = priority;
  r.sizeBytes = bytes;
  r.payload = payload;
  return r;
}

}  // namespace testing
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
