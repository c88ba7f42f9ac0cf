// pickForLease (lease_endpoint.hpp): the gateway reports the endpoint it dispatched a request to
// on the request's lease, from the outcome callback, with the position the pool's pick answered.
#include "lease_endpoint.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "holdback/detector/detectors.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

// Forwards to the request's ticket and records each call and its answer.
struct LeaseEndpointCall {
  RequestId id = 0;
  std::size_t endpoint = 0;
  bool held = false;  // the controller's answer: a lease was held for `id`
};
struct LeaseEndpointRecorder {
  Ticket lease;
  std::vector<LeaseEndpointCall>* calls = nullptr;

  bool setEndpoint(std::size_t endpoint) {
    const bool held = lease.setEndpoint(endpoint);
    calls->push_back({lease.id(), endpoint, held});
    return held;
  }
};

TEST(LeaseEndpoint, TheDispatchedRequestsLeaseGetsThePickedEndpoint) {
  const TimePoint t0 = TimePoint{} + 100s;
  std::vector<std::string> urls;
  std::vector<HostPort> hosts;
  for (int i = 0; i < 3; ++i) {
    urls.push_back("http://127.0.0.1:" + std::to_string(8101 + i));
    hosts.push_back({"127.0.0.1", 8101 + i});
  }
  auto pool = std::make_shared<Pool>(std::move(urls), std::move(hosts));
  // Endpoint 2 has the smallest waiting queue: the picker's choice (rule 5).
  pool->recordScrape(0, {.waiting = 2, .kvCacheUsage = 0.1}, t0, {}, 0);
  pool->recordScrape(1, {.waiting = 1, .kvCacheUsage = 0.1}, t0, {}, 0);
  pool->recordScrape(2, {.waiting = 0, .kvCacheUsage = 0.1}, t0, {}, 0);
  std::shared_ptr<const SaturationDetector> detector =
      std::move(UtilizationDetector::create({.queueDepthThreshold = 4,
                                             .kvCacheUtilThreshold = 0.8,
                                             .metricsStalenessThreshold = 1s}))
          .value();

  std::vector<LeaseEndpointCall> calls;
  FlowController* controller = nullptr;
  std::optional<Pool::Dispatch> dispatch;
  FlowControllerOptions o;
  o.policy = std::move(StaticUsageLimitPolicy::create()).value();
  o.detector = detector;
  o.endpoints = pool;
  o.eviction.enabled = true;  // every dispatched request holds a lease
  o.eviction.evict = [](const Revocation&) {};
  o.onOutcome = [&](Completion&& c) {
    if (c.outcome.dispatched()) {
      dispatch = pickForLease(*pool, LeaseEndpointRecorder{controller->ticket(c.id), &calls},
                              *detector, c.finalizedAt, 100);
    }
  };
  auto created = std::move(FlowController::create(std::move(o))).value();
  controller = created.get();

  FlowRequest request;
  request.flowId = "f";
  request.kvTokens = 100;
  const Ticket ticket = controller->enqueue(std::move(request), t0);
  ASSERT_EQ(controller->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
  ASSERT_TRUE(dispatch.has_value());
  EXPECT_EQ(dispatch->endpoint, 2u);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].id, ticket.id());
  EXPECT_EQ(calls[0].endpoint, 2u);
  EXPECT_TRUE(calls[0].held) << "the lease exists when the outcome callback runs";
  EXPECT_TRUE(controller->release(ticket.id(), t0 + 1s));
  controller->shutdown(t0 + 1s);
}

}  // namespace
}  // namespace holdback::gateway
