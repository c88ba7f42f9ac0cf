// The inline ABI namespace: user code names holdback::X, the compiled names carry the ABI tag.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <typeinfo>

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/policy/policies.hpp"
#include "holdback/version.hpp"

#define HOLDBACK_TEST_STR2(x) #x
#define HOLDBACK_TEST_STR(x) HOLDBACK_TEST_STR2(x)

static_assert(
    std::is_same_v<holdback::FlowController, holdback::HOLDBACK_ABI_NAMESPACE::FlowController>);
static_assert(std::is_same_v<holdback::config::ParamReader,
                             holdback::HOLDBACK_ABI_NAMESPACE::config::ParamReader>);

namespace {

std::string abiTag() {
  return HOLDBACK_TEST_STR(HOLDBACK_ABI_NAMESPACE);
}

TEST(AbiNamespace, TagFollowsTheProjectVersion) {
  const std::string major = std::to_string(HOLDBACK_VERSION_MAJOR);
  const std::string expected =
      HOLDBACK_VERSION_MAJOR == 0 ? "v0_" + std::to_string(HOLDBACK_VERSION_MINOR) : "v" + major;
  EXPECT_EQ(abiTag(), expected);
}

// Itanium C++ ABI (GCC, Clang): holdback::<tag>::Name mangles as N8holdback<len><tag>...
TEST(AbiNamespace, MangledNamesCarryTheTag) {
  const std::string prefix = "8holdback" + std::to_string(abiTag().size()) + abiTag();
  for (const char* name :
       {typeid(holdback::FlowController).name(), typeid(holdback::PriorityHoldbackPolicy).name(),
        typeid(holdback::Diagnostics).name(), typeid(holdback::config::ConfigBundle).name()}) {
    EXPECT_NE(std::string(name).find(prefix), std::string::npos) << name;
  }
}

}  // namespace
