// The simulator tests' arm lookup: a built-in arm by name (a failed expectation naming it when
// there is none), and one run of it on a scenario.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sim/arms.hpp"
#include "sim/simulator.hpp"

namespace holdback::sim {

inline Arm testArm(const std::string& name) {
  Arm arm;
  EXPECT_TRUE(findArm(name, arm)) << name;
  return arm;
}

inline ArmResult runTestArm(const Scenario& s, const std::string& name) {
  return runArm(s, testArm(name));
}

}  // namespace holdback::sim
