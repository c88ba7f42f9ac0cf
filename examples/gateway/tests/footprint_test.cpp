// The gateway's declared KV footprint: max_tokens, else the band's output learned from
// completions (footprint.hpp).
#include "footprint.hpp"

#include <gtest/gtest.h>

namespace holdback::gateway {
namespace {

TEST(GatewayFootprint, MaxTokensIsDeclaredAsIs) {
  const auto learned = makeOutputEstimator();
  for (int i = 0; i < 50; ++i) learned->record(100, 900.0);
  const CompletionBody body =
      scanCompletionBody(R"({"prompt": "one two three", "max_tokens": 64})");
  ASSERT_EQ(body.maxTokens, 64);
  EXPECT_EQ(declaredFootprint(body, *learned, 100), body.promptTokens + 64);
}

TEST(GatewayFootprint, WithoutMaxTokensTheBandsLearnedOutputIsDeclared) {
  const auto learned = makeOutputEstimator();
  const CompletionBody body = scanCompletionBody(R"({"prompt": "one two three"})");
  ASSERT_EQ(body.maxTokens, 0);
  // Nothing learned yet: the completions API's default.
  EXPECT_EQ(declaredFootprint(body, *learned, 100), body.promptTokens + 16);
  // Band 100's answers run to about 400 tokens; band -1's are not learned.
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(learnsFootprint(body, true, false));
    learned->record(100, 380.0 + (i % 5) * 10.0);  // 380..420
  }
  const std::int64_t declared = declaredFootprint(body, *learned, 100);
  // Their p90 (420), within a step of the streaming estimate (~0.05 x 0.9 x 400 tokens).
  EXPECT_GE(declared, body.promptTokens + 390);
  EXPECT_LE(declared, body.promptTokens + 450);
  EXPECT_EQ(declaredFootprint(body, *learned, -1), body.promptTokens + 16);
}

TEST(GatewayFootprint, OnlyUnlimitedCompletedRequestsTeach) {
  const CompletionBody unlimited = scanCompletionBody(R"({"prompt": "x"})");
  const CompletionBody limited = scanCompletionBody(R"({"prompt": "x", "max_tokens": 8})");
  EXPECT_TRUE(learnsFootprint(unlimited, true, false));
  EXPECT_FALSE(learnsFootprint(unlimited, false, false));  // no usage figure
  EXPECT_FALSE(learnsFootprint(unlimited, true, true));    // revoked: cut short
  EXPECT_FALSE(learnsFootprint(limited, true, false));     // declares its own limit
}

}  // namespace
}  // namespace holdback::gateway
