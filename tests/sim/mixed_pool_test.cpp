// Mixed pools (pool.groups): the scenario reader's groups form and its errors, and each
// endpoint's own capacity reaching the simulated servers, the Endpoint view and the detectors.
#include <gtest/gtest.h>

#include <string>

#include "holdback/config/document.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {
namespace {

Result<Scenario> parse(const char* yaml) {
  auto doc = config::parseDocument(yaml);
  EXPECT_TRUE(doc.ok()) << doc.diagnostics().toString();
  return parseScenario(doc->json);
}

TEST(MixedPoolTest, GroupsAreReadInOrderBesideTheSingleGroupForm) {
  const auto s = parse(R"(
pool:
  groups:
    - {endpoints: 2, slots: 64, kvCapacityTokens: 131072, prefillPerTokenMs: 0.02, tpotBaseMs: 4}
    - {endpoints: 3, slots: 12, kvCapacityTokens: 16384, tpotPerRunningMs: 0.5}
)");
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  ASSERT_EQ(s->pool.groups.size(), 2u);
  EXPECT_EQ(s->pool.endpoints, 5);
  EXPECT_EQ(s->pool.totalSlots(), 2 * 64 + 3 * 12);
  EXPECT_EQ(s->pool.totalKvCapacityTokens(), 2 * 131072 + 3 * 16384);
  const auto specs = s->pool.endpointSpecs();
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs[1].slots, 64);
  EXPECT_EQ(specs[1].timing.prefillPerTokenMs, 0.02);
  EXPECT_EQ(specs[1].timing.tpotBaseMs, 4.0);
  EXPECT_EQ(specs[2].slots, 12);
  EXPECT_EQ(specs[4].kvCapacityTokens, 16384);
  EXPECT_EQ(specs[4].timing.tpotPerRunningMs, 0.5);
  EXPECT_EQ(specs[4].timing.tpotBaseMs, PoolTiming{}.tpotBaseMs);  // unset: the default
  EXPECT_EQ(describePool(s->pool), "2 endpoints x 64 slots + 3 endpoints x 12 slots");

  // The single-group form still loads, as one group.
  const auto single = parse("pool: {endpoints: 3, slots: 8}\n");
  ASSERT_TRUE(single.ok()) << single.diagnostics().toString();
  EXPECT_TRUE(single->pool.groups.empty());
  ASSERT_EQ(single->pool.endpointGroups().size(), 1u);
  EXPECT_EQ(single->pool.totalSlots(), 24);
  EXPECT_EQ(describePool(single->pool), "3 endpoints x 8 slots");
}

// Each bad document names the path, the value and what is allowed.
TEST(MixedPoolTest, BadGroupsAreErrorsNamingThePath) {
  struct Case {
    const char* yaml;
    const char* path;
    const char* says;
  };
  const Case cases[] = {
      {"pool: {slots: 8, groups: [{endpoints: 1}]}", "/pool/slots:", "not both"},
      {"pool: {groups: []}", "/pool/groups:", "an empty list"},
      {"pool: {groups: 3}", "/pool/groups:", "expected a non-empty list"},
      {"pool: {groups: [{endpoints: 0, slots: 8}]}",
       "/pool/groups/0/endpoints:", "expected an integer in [1, 100000]"},
      {"pool: {groups: [{slots: 8}]}", "/pool/groups/0/endpoints:", "missing"},
      {"pool: {groups: [{endpoints: 1}, {endpoints: 1, slots: -2}]}",
       "/pool/groups/1/slots:", "out of range"},
      {"pool: {groups: [{endpoints: 1, tpotBaseMs: 0}]}", "/pool/groups/0/tpotBaseMs:", "> 0"},
      {"pool: {groups: [{endpoints: 1, kvCapacityTokens: 0}]}",
       "/pool/groups/0/kvCapacityTokens:", "out of range"},
      {"pool: {groups: [{endpoints: 1, gpus: 2}]}", "/pool/groups/0/gpus:", ""},
      {"pool: {groups: [{endpoints: 60000}, {endpoints: 60000}]}",
       "/pool/groups:", "at most 100000"},
      {"pool: {aggregation: median}", "/pool/aggregation:", "capacity"},
  };
  for (const Case& c : cases) {
    const auto s = parse(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    const std::string text = s.diagnostics().toString();
    EXPECT_NE(text.find(c.path), std::string::npos) << c.yaml << "\n" << text;
    EXPECT_NE(text.find(c.says), std::string::npos) << c.yaml << "\n" << text;
  }
}

// The simulated servers run with their own group's slots: on a pool of one 2-slot and one
// 6-slot server, the concurrency detector with per-endpoint capacity reads the pool full at 8 in
// flight, and the large server carries three times the small one's requests.
TEST(MixedPoolTest, EachEndpointsCapacityReachesTheDetectorAndTheServers) {
  auto s = parse(R"(
durationSeconds: 20
detector: concurrency
pool:
  groups:
    - {endpoints: 1, slots: 2, kvCapacityTokens: 100000}
    - {endpoints: 1, slots: 6, kvCapacityTokens: 100000}
classes:
  - {name: batch, priority: 0, arrival: {process: backlog, backlog: 40},
     inputTokens: {mean: 64}, outputTokens: {mean: 64}}
)");
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  const config::Json doc = detectorDocument(s.value());
  EXPECT_EQ(doc["parameters"]["endpointCapacity"], true);
  auto detector = makeDetector(s.value());
  ASSERT_TRUE(detector.ok()) << detector.diagnostics().toString();
  std::vector<Endpoint> view(2);
  view[0].maxRunningRequests = 2;
  view[1].maxRunningRequests = 6;
  view[0].inFlightRequests = 2;
  view[1].inFlightRequests = 6;
  EXPECT_DOUBLE_EQ(detector.value()->saturation(view, TimePoint{}), 1.0);
  view[1].inFlightRequests = 2;
  EXPECT_DOUBLE_EQ(detector.value()->saturation(view, TimePoint{}), 0.5);

  Arm arm;
  ASSERT_TRUE(findArm("static-1.0", arm));
  RunOptions options;
  options.collectSeries = true;
  const ArmResult r = runArm(s.value(), arm, options);
  std::int64_t done[2] = {0, 0};
  for (const RequestRecord& q : r.requests) {
    if (q.endpoint >= 0 && q.endpoint < 2) ++done[q.endpoint];
  }
  ASSERT_GT(done[0], 0);
  // The small server runs 2 at a time, the large 6: its share follows its slots.
  EXPECT_GT(static_cast<double>(done[1]) / static_cast<double>(done[0]), 2.0)
      << done[1] << " vs " << done[0];
}

TEST(MixedPoolTest, TheBuiltInMixedPoolHasTwoSizes) {
  Scenario s;
  ASSERT_TRUE(findScenario("mixed-pool", s));
  ASSERT_EQ(s.pool.groups.size(), 2u);
  EXPECT_EQ(s.pool.endpoints, 6);
  EXPECT_EQ(s.pool.totalSlots(), 2 * 64 + 4 * 12);
  EXPECT_EQ(detectorDocument(s)["parameters"]["aggregation"], "capacity");
}

}  // namespace
}  // namespace holdback::sim
