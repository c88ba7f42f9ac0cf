// Classes that declare no output (TrafficClass::declaresOutput false): the simulated gateway
// declares input + the class's output learned from completions (core/output_estimator.hpp).
#include <gtest/gtest.h>

#include <string>

#include "holdback/config/document.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {
namespace {

const WindowStats& footprintWindow(const ArmResult& a, const std::string& cls,
                                   const std::string& window) {
  for (const ClassResult& c : a.classes) {
    if (c.name != cls) continue;
    for (const WindowStats& w : c.windows) {
      if (w.window == window) return w;
    }
  }
  ADD_FAILURE() << "no " << cls << " / " << window;
  static const WindowStats none{};
  return none;
}

TEST(FootprintSimTest, DeclaresOutputIsReadAndDefaultsToTrue) {
  EXPECT_TRUE(defaultScenario().classes.front().declaresOutput);
  auto doc = config::parseDocument(R"(
classes:
  - {name: chat, priority: 10, arrival: {process: poisson, rate: 1}, declaresOutput: false}
)");
  ASSERT_TRUE(doc.ok());
  const auto s = parseScenario(doc->json);
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  EXPECT_FALSE(s->classes[0].declaresOutput);
  auto bad = config::parseDocument(R"({"classes": [{"name": "chat", "declaresOutput": "no"}]})");
  ASSERT_TRUE(bad.ok());
  const auto error = parseScenario(bad->json);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.diagnostics().toString().find("/classes/0/declaresOutput"), std::string::npos)
      << error.diagnostics().toString();
}

// kv-bound with the protected classes declaring no output: the recommended arm's reserve and
// fit-first pick count their learned output, and interactive stays as fast as when the output
// is declared.
TEST(FootprintSimTest, RecommendedProtectsClassesThatDeclareNoOutput) {
  Scenario s;
  ASSERT_TRUE(findScenario("kv-bound", s));
  s.detector = DetectorKind::kConcurrency;
  s.durationSeconds = 60.0;  // one idle and one burst phase
  for (TrafficClass& c : s.classes) c.declaresOutput = c.priority < 0;  // batch declares
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const ArmResult alone = runArm(s, none, {.onlyClass = 0});
  const double unloaded = footprintWindow(alone, "interactive", "idle").ttftMs.p99;
  ASSERT_GT(unloaded, 0.0);
  Arm recommended;
  Arm staticOne;
  ASSERT_TRUE(findArm("recommended", recommended));
  ASSERT_TRUE(findArm("static-1.0", staticOne));
  const ArmResult arms[] = {runArm(s, recommended), runArm(s, staticOne)};
  EXPECT_LE(footprintWindow(arms[0], "interactive", "idle").ttftMs.p99 / unloaded, 1.5);
  EXPECT_LE(footprintWindow(arms[0], "interactive", "burst").ttftMs.p99 / unloaded, 1.5);
  EXPECT_GE(footprintWindow(arms[0], "batch", "idle").outputTokensPerSecond,
            0.85 * footprintWindow(arms[1], "batch", "idle").outputTokensPerSecond);
}

}  // namespace
}  // namespace holdback::sim
