// Embedding the FlowController in a (simulated) gateway.
//
// One model server takes 4 concurrent requests. A small detector reads the gateway's own
// in-flight count (saturation = inFlight / 4) and a PriorityHoldbackPolicy keeps capacity in
// reserve for higher priorities: bands 10 (chat), 0 (standard) and -10 (batch) get ceilings
// 1.0, 0.75 and 0.5, so batch only dispatches below 2 in flight and standard below 3.
// Time is simulated (10 ms steps, each request runs 30 ms), so the output is deterministic.
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"

using namespace holdback;
using namespace std::chrono_literals;

namespace {

constexpr double kServerCapacity = 4.0;

// Saturation = in-flight requests / capacity, summed over the pool.
class InFlightDetector final : public SaturationDetector {
 public:
  InFlightDetector() : SaturationDetector("in-flight") {}
  double saturation(std::span<const Endpoint> endpoints, TimePoint) const noexcept override {
    if (endpoints.empty()) return 1.0;
    double in_flight = 0.0;
    for (const Endpoint& e : endpoints) in_flight += static_cast<double>(e.inFlightRequests);
    return in_flight / (kServerCapacity * static_cast<double>(endpoints.size()));
  }
  FilterResult filter(std::span<const Endpoint>, TimePoint,
                      std::span<std::size_t>) const noexcept override {
    return {};
  }
  std::string_view type() const noexcept override { return "in-flight"; }
};

struct Running {
  std::string name;
  TimePoint doneAt;
};

}  // namespace

// NOLINTNEXTLINE(bugprone-exception-escape): an example; only std::bad_alloc could escape
int main() {
  // The host's pool: one server; the host counts its in-flight requests into the snapshot.
  auto pool = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1, "vllm-"));
  const auto addInFlight = [&pool](std::int64_t delta) {
    pool->update(
        [delta](std::vector<Endpoint>& endpoints) { endpoints[0].inFlightRequests += delta; });
  };
  std::vector<Running> running;
  std::vector<Completion> finished;  // filled by the callback, handled by the loop
  int dispatched = 0;
  int other = 0;

  auto policy = PriorityHoldbackPolicy::create(
      {.strategy = HoldbackStrategy::kStepwiseSpread, .minCeiling = 0.5, .maxCeiling = 1.0});
  if (!policy) {
    std::fprintf(stderr, "%s\n", policy.diagnostics().toString().c_str());
    return 1;
  }
  auto created = FlowController::create({
      .policy = std::move(policy).value(),
      .detector = std::make_shared<InFlightDetector>(),
      .endpoints = pool,
      .onOutcome = [&](Completion&& c) { finished.push_back(std::move(c)); },
      .bands = {{.priority = 10}, {.priority = 0}, {.priority = -10}},
      .defaultRequestTtl = 10s,
  });
  if (!created) {
    std::fprintf(stderr, "%s\n", created.diagnostics().toString().c_str());
    return 1;
  }
  FlowController& fc = *created.value();

  const TimePoint t0{};
  // Arrivals at t = 0: batch first, then standard, then chat; the payload is a display name.
  const struct {
    const char* flow;
    Priority priority;
    const char* name;
  } arrivals[] = {{"batch", -10, "batch-1"}, {"batch", -10, "batch-2"}, {"batch", -10, "batch-3"},
                  {"tenant-a", 0, "std-a1"}, {"tenant-b", 0, "std-b1"}, {"tenant-a", 0, "std-a2"},
                  {"chat", 10, "chat-1"},    {"chat", 10, "chat-2"}};
  for (const auto& a : arrivals) {
    FlowRequest r;
    r.flowId = a.flow;
    r.priority = a.priority;
    r.sizeBytes = 512;
    r.payload = std::string(a.name);
    (void)fc.enqueue(std::move(r), t0);
  }

  for (TimePoint now = t0; now <= t0 + 200ms; now += 10ms) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count();
    // Requests that finished on the server free their slot.
    for (auto it = running.begin(); it != running.end();) {
      if (it->doneAt <= now) {
        std::printf("t=%3lldms finished   %s\n", static_cast<long long>(ms), it->name.c_str());
        addInFlight(-1);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    // Dispatch while the controller says yes; each cycle re-reads saturation.
    for (;;) {
      const DispatchResult r = fc.dispatchCycle(now);
      for (Completion& c : finished) {
        const std::string name = std::any_cast<std::string>(c.payload);
        if (c.outcome.dispatched()) {
          ++dispatched;
          std::printf("t=%3lldms dispatched %-8s priority %3d  saturation %.2f\n",
                      static_cast<long long>(ms), name.c_str(), c.bandPriority, r.saturation);
          addInFlight(1);
          running.push_back({name, now + 30ms});
        } else {
          ++other;
          const HttpDisposition http = toHttp(c.outcome);
          std::printf("t=%3lldms %s %s -> HTTP %d\n", static_cast<long long>(ms), name.c_str(),
                      std::string(toString(c.outcome.kind)).c_str(), http.status);
        }
      }
      finished.clear();
      if (r.kind != DispatchResult::Kind::kDispatched) {
        if (r.kind == DispatchResult::Kind::kGated && !running.empty() && ms % 30 == 0) {
          std::printf("t=%3lldms gated at priority %d (saturation %.2f)\n",
                      static_cast<long long>(ms), r.priority, r.saturation);
        }
        break;
      }
    }
  }
  fc.shutdown(t0 + 1s);
  std::printf("summary: dispatched=%d other=%d queued=%zu\n", dispatched, other,
              fc.stats().queuedRequests);
  return dispatched == 8 ? 0 : 1;
}
