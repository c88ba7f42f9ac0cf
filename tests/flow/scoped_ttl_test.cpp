// Scoped queue TTLs: the smallest set TTL of the request, its band and the default wins; the
// request header; the separate no-endpoint budget; no allocation added to enqueue.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_controller_fixture.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/flow/admission.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/flow/request_headers.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;

Duration scopedTtlOf(std::optional<Duration> req, Duration band, Duration global) {
  const TimePoint now = TimePoint{} + 1h;
  return resolveRequestTtl(req, band, global, std::nullopt, now).effectiveTtl;
}

TEST(ScopedTtlTest, SmallestSetLevelWins) {
  EXPECT_EQ(scopedTtlOf(std::nullopt, 0s, 60s), 60s);    // default only
  EXPECT_EQ(scopedTtlOf(std::nullopt, 5s, 60s), 5s);     // band tighter
  EXPECT_EQ(scopedTtlOf(std::nullopt, 300s, 60s), 60s);  // band cannot extend the default
  EXPECT_EQ(scopedTtlOf(2s, 5s, 60s), 2s);               // request tighter than both
  EXPECT_EQ(scopedTtlOf(30s, 5s, 60s), 5s);              // request cannot extend the band
  EXPECT_EQ(scopedTtlOf(120s, 0s, 60s), 60s);            // nor the default
  EXPECT_EQ(scopedTtlOf(120s, 0s, 0s), 120s);            // default 0 = unset: the request's own
  EXPECT_EQ(scopedTtlOf(std::nullopt, 7s, 0s), 7s);
  EXPECT_EQ(scopedTtlOf(std::nullopt, 0s, 0s), 0s);  // nothing set: never expires
  EXPECT_EQ(scopedTtlOf(-3s, 0s, 9s), 9s);           // a non-positive level is not set
  EXPECT_EQ(scopedTtlOf(0s, -1s, 9s), 9s);
}

TEST(ScopedTtlTest, DeadlineStillClampsTheScopedBudget) {
  const TimePoint now = TimePoint{} + 1h;
  EXPECT_EQ(resolveRequestTtl(std::nullopt, 5s, 60s, now + 2s, now).effectiveTtl, 2s);
  EXPECT_EQ(resolveRequestTtl(std::nullopt, 5s, 60s, now + 20s, now).effectiveTtl, 5s);
  EXPECT_EQ(resolveRequestTtl(std::nullopt, 0s, 0s, now + 20s, now).effectiveTtl, 20s);
  EXPECT_TRUE(resolveRequestTtl(1s, 5s, 60s, now, now).deadlinePassed);
}

TEST(ScopedTtlTest, HeaderParsing) {
  using S = RequestTtlHeader::Status;
  EXPECT_EQ(parseRequestTtl(std::nullopt).status, S::kAbsent);
  EXPECT_EQ(parseRequestTtl("1500ms").status, S::kValid);
  EXPECT_EQ(parseRequestTtl("1500ms").ttl, 1500ms);
  EXPECT_EQ(parseRequestTtl(" 2s ").ttl, 2s);
  EXPECT_EQ(parseRequestTtl("1m30s").ttl, 90s);
  for (const char* bad : {"", "abc", "15", "0", "0s", "-2s", "2 s", "9999999999h", "1.5x"}) {
    EXPECT_EQ(parseRequestTtl(bad).status, S::kInvalid) << bad;
  }
}

TEST_F(FlowControllerTest, BandTtlShedsItsBandSoonerThanTheDefault) {
  auto o = options();
  o.defaultRequestTtl = 300s;
  o.bands = {{.priority = 10, .requestTtl = 5s}, {.priority = -10, .requestTtl = 600s}};
  auto fc = make(std::move(o));
  fc->enqueue(request("i", 10, 1), t0);   // interactive: 5 s
  fc->enqueue(request("b", -10, 2), t0);  // batch: 600 s, capped by the default 300 s
  fc->enqueue(request("d", 0, 3), t0);    // band 0: the default 300 s
  auto r = request("i", 10, 4);
  r.ttl = 1s;  // the header's budget: tighter than its band
  fc->enqueue(std::move(r), t0);
  auto loose = request("i", 10, 5);
  loose.ttl = 100s;  // looser than its band: the band's 5 s still applies
  fc->enqueue(std::move(loose), t0);
  EXPECT_EQ(fc->expire(t0 + 999ms), 0u);
  EXPECT_EQ(fc->expire(t0 + 1s), 1u);
  EXPECT_EQ(rec.all().back().payload, 4);
  EXPECT_EQ(fc->expire(t0 + 5s), 2u);
  EXPECT_EQ(fc->expire(t0 + 299s), 0u);
  EXPECT_EQ(fc->expire(t0 + 300s), 2u);
  ASSERT_EQ(rec.size(), 5u);
  for (const auto& c : rec.all()) EXPECT_EQ(c.outcome.kind, QueueOutcome::kEvictedTtl);
}

TEST_F(FlowControllerTest, ProvisionedBandsTakeTheTemplateTtl) {
  auto o = options();
  o.defaultBand.requestTtl = 3s;
  o.defaultNegativeBand = BandTemplate{.requestTtl = 1s};
  auto fc = make(std::move(o));
  fc->enqueue(request("p", 7, 1), t0);   // provisioned from defaultBand
  fc->enqueue(request("n", -7, 2), t0);  // from defaultNegativeBand
  EXPECT_EQ(fc->expire(t0 + 1s), 1u);
  EXPECT_EQ(rec.all().back().payload, 2);
  EXPECT_EQ(fc->expire(t0 + 3s), 1u);
  EXPECT_EQ(rec.all().back().payload, 1);
}

// While the pool has no endpoint, the scoped TTLs do not run: only noEndpointRequestTtl, charged
// from the regime change; such an eviction is 503, a saturation-regime one 429.
TEST_F(FlowControllerTest, NoEndpointBudgetIsSeparateFromTheScopedTtls) {
  auto o = options();
  o.defaultRequestTtl = 60s;
  o.noEndpointRequestTtl = 2s;
  o.bands = {{.priority = 10, .requestTtl = 30s}};
  auto fc = make(std::move(o));
  fc->enqueue(request("i", 10, 1), t0);
  pool->setSize(0);
  EXPECT_EQ(fc->expire(t0 + 10s), 0u);  // regime empty since t0 + 10 s
  EXPECT_EQ(fc->expire(t0 + 12s), 1u);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec.all()[0].outcome.kind, QueueOutcome::kEvictedNoEndpoints);
  EXPECT_EQ(toHttp(rec.all()[0].outcome, true).status, 503);
  pool->setSize(1);
  EXPECT_EQ(fc->expire(t0 + 20s), 0u);  // the regime is non-empty again from t0 + 20 s
  fc->enqueue(request("i", 10, 2), t0 + 20s);
  EXPECT_EQ(fc->expire(t0 + 50s), 1u);  // the band's 30 s
  EXPECT_EQ(rec.all()[1].outcome.kind, QueueOutcome::kEvictedTtl);
  EXPECT_EQ(toHttp(rec.all()[1].outcome, false).status, 429);
}

TEST_F(FlowControllerTest, ScopedTtlsAddNoAllocationToEnqueue) {
  auto o = options();
  o.onOutcome = [](Completion&&) {};  // the recorder's vector would allocate
  o.bands = {{.priority = 5, .requestTtl = 5s}, {.priority = 0}};
  auto fc = make(std::move(o));
  std::vector<FlowRequest> requests;
  for (int i = 0; i < 400; ++i) {
    requests.push_back(request("scoped-ttl-flow-" + std::to_string(i % 5), i % 2 == 0 ? 5 : 0, i));
    if (i % 3 == 0) requests.back().ttl = 2s;
  }
  for (int i = 0; i < 100; ++i) (void)fc->enqueue(std::move(requests[i]), t0);
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);  // the pool now holds 100 records
  for (int i = 100; i < 150; ++i) (void)fc->enqueue(std::move(requests[i]), t0);  // depth 50
  holdback::testing::AllocationCounter counter;
  for (int i = 150; i < 400; ++i) {
    (void)fc->enqueue(std::move(requests[i]), t0);
    fc->dispatchCycle(t0);
  }
  EXPECT_EQ(counter.count(), 0u);
}

std::string scopedTtlConfig(const std::string& flow_control) {
  return R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
             "featureGates": ["flowControl"], "flowControl": {)" +
         flow_control + "}}";
}

TEST(ScopedTtlConfigTest, BandTtlsAreReadValidatedAndListed) {
  const auto loaded = config::loadEndpointPickerConfigText(scopedTtlConfig(
      R"("defaultRequestTTL": "300s", "defaultPriorityBand": {"defaultRequestTTL": "120s"},
         "priorityBands": [{"priority": 10, "defaultRequestTTL": "5s"}, {"priority": -10}])"));
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const FlowControllerOptions& o = loaded.value()->controller;
  EXPECT_EQ(o.bands.at(0).requestTtl, 5s);
  EXPECT_EQ(o.bands.at(1).requestTtl, 0s);
  EXPECT_EQ(o.defaultBand.requestTtl, 120s);
  const std::string effective = config::effectiveConfig(*loaded.value()).dump();
  EXPECT_NE(effective.find(R"("priority":10,"maxRequests":5000,"maxBytes":1000000000,)"
                           R"("defaultRequestTTL":"5s")"),
            std::string::npos)
      << effective;
  EXPECT_NE(effective.find(R"("defaultRequestTTL":")" + formatDuration(120s) + "\""),
            std::string::npos)
      << effective;

  const auto bad = config::loadEndpointPickerConfigText(scopedTtlConfig(
      R"("priorityBands": [{"priority": 1, "defaultRequestTTL": "-2s"},
                           {"priority": 2, "defaultRequestTTL": "soon"}])"));
  ASSERT_FALSE(bad);
  const std::string text = bad.diagnostics().toString();
  EXPECT_NE(text.find("/flowControl/priorityBands/0/defaultRequestTTL"), std::string::npos) << text;
  EXPECT_NE(text.find("-2s"), std::string::npos) << text;
  EXPECT_NE(text.find("/flowControl/priorityBands/1/defaultRequestTTL"), std::string::npos) << text;
}

TEST_F(FlowControllerTest, CreateRejectsANegativeBandTtlWithItsPath) {
  auto o = options();
  o.bands = {{.priority = 4, .requestTtl = -1s}};
  o.defaultBand.requestTtl = -2s;
  const auto made = FlowController::create(std::move(o));
  ASSERT_FALSE(made);
  const std::string text = made.diagnostics().toString();
  EXPECT_NE(text.find("/bands/0/requestTtl"), std::string::npos) << text;
  EXPECT_NE(text.find("/defaultBand/requestTtl"), std::string::npos) << text;
}

}  // namespace
}  // namespace holdback
