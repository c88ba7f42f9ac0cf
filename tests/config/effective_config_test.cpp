#include "holdback/config/effective_config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "golden_files.hpp"

namespace holdback::config {
namespace {

namespace fs = std::filesystem;

using test_support::kGoldenDir;
using test_support::readFile;

// The documented shape is pinned byte for byte: <config>.effective.json next to each config.
// HOLDBACK_UPDATE_GOLDEN=1 rewrites them (review the diff: the shape may only grow).
TEST(EffectiveConfigTest, ShapeIsPinnedByGoldenFiles) {
  for (const char* name :
       {"reference-minimal.json", "reference-full.yaml", "defaults-only.json", "gate-off.yaml"}) {
    const auto loaded = loadEndpointPickerConfigFile((kGoldenDir / name).string());
    ASSERT_TRUE(loaded) << name << "\n" << loaded.diagnostics().toString();
    const std::string got = effectiveConfig(*loaded.value()).dump(2) + "\n";
    const fs::path expected = kGoldenDir / (std::string(name) + ".effective.json");
    if (std::getenv("HOLDBACK_UPDATE_GOLDEN") != nullptr) {
      std::ofstream(expected, std::ios::binary) << got;
      continue;
    }
    EXPECT_EQ(got, readFile(expected)) << name;
  }
}

TEST(EffectiveConfigTest, ShowsEveryDefault) {
  const auto loaded = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"],
          "flowControl": {"priorityBands": [{"priority": 10}, {"priority": 100}]}})");
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const OrderedJson e = effectiveConfig(*loaded.value());
  EXPECT_EQ(e["schemaVersion"], 1);
  EXPECT_EQ(e["flowControl"], true);
  EXPECT_EQ(e["usageLimitPolicy"]["type"], "static-usage-limit-policy");
  EXPECT_EQ(e["usageLimitPolicy"]["parameters"]["threshold"], 1.0);
  EXPECT_EQ(e["saturationDetector"]["type"], "utilization-detector");
  EXPECT_EQ(e["saturationDetector"]["parameters"]["queueDepthThreshold"], 5);
  EXPECT_EQ(e["saturationDetector"]["parameters"]["metricsStalenessThreshold"], "200ms");
  EXPECT_EQ(e["maxRequests"], 0);
  EXPECT_EQ(e["defaultRequestTTL"], "60s");
  EXPECT_EQ(e["noEndpointRequestTTL"], "60s");
  EXPECT_TRUE(e["defaultNegativePriorityBand"].is_null());
  EXPECT_EQ(e["defaultPriorityBand"]["maxRequests"], 5000);
  EXPECT_EQ(e["defaultPriorityBand"]["fairnessPolicy"]["type"], "global-strict-fairness-policy");
  ASSERT_EQ(e["priorityBands"].size(), 2u);
  EXPECT_EQ(e["priorityBands"][0]["priority"], 100);  // highest first
  EXPECT_EQ(e["priorityBands"][1]["maxBytes"], 1'000'000'000);
  EXPECT_EQ(e["priorityBands"][1]["orderingPolicy"]["type"], "fcfs-ordering-policy");
}

TEST(EffectiveConfigTest, HostTypesHaveNullParameters) {
  struct Lifo final : OrderingPolicy {
    std::string_view type() const noexcept override { return "lifo"; }
    bool less(const QueuedRequestView& a, const QueuedRequestView& b) const noexcept override {
      return a.enqueueTime > b.enqueueTime;
    }
  };
  EXPECT_TRUE(effectiveParameters(Lifo{}).is_null());
  EXPECT_TRUE(effectiveParameters(FcfsOrderingPolicy{}).is_object());
}

}  // namespace
}  // namespace holdback::config
