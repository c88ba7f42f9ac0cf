// Outcome taxonomy: strings and the HTTP mapping of the reference.
#include "holdback/flow/flow_controller.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "flow_controller_fixture.hpp"
#include "holdback/policy/policies.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FakeDetector;
using testing::FakeEndpoints;
using testing::FlowControllerTest;
using testing::holdbackPolicy;
using testing::Recorder;
using testing::request;
using testing::staticPolicy;
using Kind = DispatchResult::Kind;

// ---------------------------------------------------------------------------------------------
// Outcomes and HTTP mapping (§3.8)

TEST(FlowOutcomeTest, StringsFollowTheTaxonomy) {
  EXPECT_EQ(toString(QueueOutcome::kDispatched), "Dispatched");
  EXPECT_EQ(toString(QueueOutcome::kRejectedNoEndpoints), "RejectedNoEndpoints");
  EXPECT_EQ(toString(QueueOutcome::kEvictedTtl), "EvictedTTL");
  EXPECT_EQ(toString(QueueOutcome::kEvictedCancelled), "EvictedCancelled");
  EXPECT_EQ(toString(static_cast<QueueOutcome>(42)), "UnknownOutcome");
  EXPECT_EQ(toString(OutcomeCause::kTooLarge), "too-large");
  EXPECT_EQ(toString(OutcomeCause::kInvalidRequest), "invalid-request");
}

TEST(FlowOutcomeTest, HttpMappingMatchesTheReference) {
  using Q = QueueOutcome;
  using C = OutcomeCause;
  struct Row {
    Outcome outcome;
    bool poolEmpty;
    int status;
    std::string_view reason;
  };
  const Row rows[] = {
      {{Q::kDispatched, C::kNone}, false, 200, ""},
      {{Q::kRejectedCapacity, C::kQueueAtCapacity}, false, 429, "rejected-saturated"},
      {{Q::kRejectedNoEndpoints, C::kNoEndpoints}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedNoEndpoints, C::kNoEndpoints}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedTtl, C::kTtlExpired}, true, 503, "rejected-no-endpoints"},
      {{Q::kEvictedTtl, C::kTtlExpired}, false, 429, "rejected-ttl-expired"},
      {{Q::kEvictedCancelled, C::kCancelled}, false, 503, "rejected-context-cancelled"},
      {{Q::kRejectedOther, C::kNotRunning}, false, 503, "rejected-shutting-down"},
      {{Q::kEvictedOther, C::kNotRunning}, false, 503, "rejected-shutting-down"},
      {{Q::kRejectedOther, C::kTtlExpired}, false, 429, "rejected-ttl-expired"},
      {{Q::kRejectedOther, C::kCancelled}, false, 503, "rejected-context-cancelled"},
      {{Q::kRejectedOther, C::kInvalidRequest}, false, 500, ""},
      {{Q::kRejectedOther, C::kTooLarge}, false, 413, "rejected-too-large"},
      {{Q::kEvictedOther, C::kTooLarge}, false, 413, "rejected-too-large"},
      {{static_cast<Q>(99), C::kNone}, false, 500, ""},
  };
  for (const Row& row : rows) {
    const HttpDisposition h = toHttp(row.outcome, row.poolEmpty);
    EXPECT_EQ(h.status, row.status) << toString(row.outcome.kind);
    EXPECT_EQ(h.dropReason, row.reason) << toString(row.outcome.kind);
  }
  EXPECT_TRUE(toHttp({Q::kDispatched, C::kNone}).proceed());
}

}  // namespace
}  // namespace holdback
