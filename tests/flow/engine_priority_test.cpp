// Priority to the engine: vLLM's lower-first and SGLang's higher-first "priority" body field.
#include "holdback/flow/engine_priority.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "holdback/config/effective_config.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/core/text.hpp"

namespace holdback {
namespace {

TEST(EnginePriorityTest, VllmFlipsTheSignSglangKeepsIt) {
  EXPECT_EQ(enginePriorityValue(10, EnginePriority::kVllm), -10);
  EXPECT_EQ(enginePriorityValue(-1, EnginePriority::kVllm), 1);
  EXPECT_EQ(enginePriorityValue(0, EnginePriority::kVllm), 0);
  EXPECT_EQ(enginePriorityValue(10, EnginePriority::kSglang), 10);
  EXPECT_EQ(enginePriorityValue(-1, EnginePriority::kSglang), -1);
  constexpr Priority kMin = std::numeric_limits<Priority>::min();
  constexpr Priority kMax = std::numeric_limits<Priority>::max();
  EXPECT_EQ(enginePriorityValue(kMin, EnginePriority::kVllm), kMax);  // saturates
  EXPECT_EQ(enginePriorityValue(kMax, EnginePriority::kVllm), -std::int64_t{kMax});
  // Relative order is the same on both engines: interactive (10) before batch (-1).
  EXPECT_LT(enginePriorityValue(10, EnginePriority::kVllm),
            enginePriorityValue(-1, EnginePriority::kVllm));
  EXPECT_GT(enginePriorityValue(10, EnginePriority::kSglang),
            enginePriorityValue(-1, EnginePriority::kSglang));
}

TEST(EnginePriorityTest, BodyGetsThePriorityFieldReplacingTheClients) {
  const auto out = withEnginePriority(R"({"model": "m", "prompt": "hi", "priority": 99})", 10,
                                      EnginePriority::kVllm);
  ASSERT_TRUE(out);
  const auto j = nlohmann::json::parse(*out);
  EXPECT_EQ(j["priority"], -10);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], "hi");
  EXPECT_EQ(nlohmann::json::parse(
                *withEnginePriority(R"({"a": 1})", -1, EnginePriority::kSglang))["priority"],
            -1);
  EXPECT_FALSE(withEnginePriority(R"({"a": 1})", 3, EnginePriority::kOff));
  for (const char* bad : {"", "[1]", "{", "42", "{\"a\": 1} trailing"}) {
    EXPECT_FALSE(withEnginePriority(bad, 3, EnginePriority::kVllm)) << bad;
  }
}

// A body nested 200,000 levels deep (400 KB) once overflowed the stack in the serializer; it is
// left alone now, and a body at the limit is still rewritten.
TEST(EnginePriorityTest, BodiesNestedBeyondTheLimitAreLeftAlone) {
  const std::string deep =
      R"({"model": "m", "x": )" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_FALSE(withEnginePriority(deep, 10, EnginePriority::kVllm));
  const std::size_t inner = kMaxJsonNesting - 1;  // the object itself is one level
  const std::string at_limit =
      R"({"x": )" + std::string(inner, '[') + std::string(inner, ']') + "}";
  const auto out = withEnginePriority(at_limit, 10, EnginePriority::kVllm);
  ASSERT_TRUE(out);
  EXPECT_EQ(nlohmann::json::parse(*out)["priority"], -10);
}

TEST(EnginePriorityTest, ConfigKeyIsValidatedOffByDefaultAndListed) {
  const auto text = [](const std::string& fc) {
    return R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
               "featureGates": ["flowControl"], "flowControl": {)" +
           fc + "}}";
  };
  const auto plain = config::loadEndpointPickerConfigText(text(""));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain.value()->enginePriority, EnginePriority::kOff);
  const auto vllm = config::loadEndpointPickerConfigText(text(R"("enginePriority": "vllm")"));
  ASSERT_TRUE(vllm) << vllm.diagnostics().toString();
  EXPECT_EQ(vllm.value()->enginePriority, EnginePriority::kVllm);
  EXPECT_NE(config::effectiveConfig(*vllm.value()).dump().find(R"("enginePriority":"vllm")"),
            std::string::npos);
  const auto bad = config::loadEndpointPickerConfigText(text(R"("enginePriority": "trtllm")"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.diagnostics().toString().find("/flowControl/enginePriority"), std::string::npos)
      << bad.diagnostics().toString();
  EXPECT_EQ(parseEnginePriority("sglang"), EnginePriority::kSglang);
  EXPECT_FALSE(parseEnginePriority("VLLM"));
}

}  // namespace
}  // namespace holdback
