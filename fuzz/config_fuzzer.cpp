// Whole config files, JSON or YAML: parsing and policy loading must never crash, hang or throw,
// and a policy that loads must produce valid ceilings.
#include <cstdint>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "holdback/config/document.hpp"
#include "holdback/config/policy_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace holdback;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = config::parseDocument(text);
  if (!document.ok()) {
    fuzz::require(document.diagnostics().hasErrors(), "a failed parse reports an error");
    return 0;
  }
  static const config::PolicyRegistry registry = config::builtinPolicyRegistry();
  const auto policy = config::loadUsageLimitPolicy(document.value().json, registry);
  (void)config::withPositions(policy.diagnostics(), document.value().positions);
  if (!policy.ok()) {
    fuzz::require(policy.diagnostics().hasErrors(), "a failed load reports an error");
    return 0;
  }
  const std::vector<Priority> priorities{2147483647, 100, 50, 0, -1, -2147483647 - 1};
  std::vector<double> ceilings(priorities.size(), 1.0);
  for (const double s : {0.0, 0.5, 0.75, 1.0, 2.0}) {
    policy.value()->computeLimit(s, priorities, ceilings);
    fuzz::requireValidCeilings(ceilings);
  }
  return 0;
}
