// The gateway's GET /metrics as Prometheus tooling reads it: `promtool check metrics` (Debian
// package prometheus; the check is skipped when it is not installed) accepts the whole text, and
// every family it exposes is in docs/reference/metrics.md with the type it is exposed as.
// Through the built-in configuration (restoration by eviction on: the eviction families are
// there) after one completion, so that the counters and histograms have samples.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "gateway_support.hpp"

namespace holdback_e2e {
namespace {

using namespace std::chrono_literals;

// "# TYPE name type" lines of a Prometheus text, name -> type.
std::map<std::string, std::string> exposedTypes(const std::string& text) {
  std::map<std::string, std::string> types;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string hash, keyword, name, type;
    if (words >> hash >> keyword >> name >> type && hash == "#" && keyword == "TYPE") {
      types[name] = type;
    }
  }
  return types;
}

class GatewayMetricsE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeScratchDir("holdback-gateway-metrics-e2e");
    server_ = startModelServer("server", dir_, 16384);
    ASSERT_TRUE(server_->startedOk()) << server_->stderrTail();
    gateway_ = std::make_unique<ChildProcess>(
        "gateway",
        std::vector<std::string>{HOLDBACK_GATEWAY, "--listen", "127.0.0.1:0",
                                 "--scrape-interval-ms", "25", "--endpoint", server_->url()},
        dir_);
    ASSERT_TRUE(gateway_->startedOk()) << gateway_->stderrTail();
    std::this_thread::sleep_for(200ms);  // a few scrapes
    auto c = clientFor(*gateway_);
    auto res =
        c.post("/v1/completions", R"({"model": "fake-model", "prompt": "hello", "max_tokens": 3})",
               "application/json", {{"x-gateway-inference-objective", "interactive"}});
    ASSERT_TRUE(res) << res.error();
    ASSERT_EQ(res->status, 200) << res->body;
    metrics_ = getMetrics(*gateway_);
    ASSERT_FALSE(metrics_.empty());
  }
  void TearDown() override {
    if (!HasFailure()) return;
    for (auto* p : {gateway_.get(), server_.get()}) {
      if (p != nullptr) std::cerr << p->stderrTail() << "\n";
    }
  }
  std::string dir_;
  std::unique_ptr<ChildProcess> server_, gateway_;
  std::string metrics_;
};

TEST_F(GatewayMetricsE2ETest, PromtoolAcceptsTheWholeText) {
  const auto r = promtoolCheck(metrics_, dir_);
  if (!r) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  EXPECT_EQ(r->status, 0) << r->report;
  EXPECT_EQ(r->report, "") << "promtool's lint findings";
}

TEST_F(GatewayMetricsE2ETest, EveryExposedFamilyIsInTheReferenceWithItsType) {
  const auto types = exposedTypes(metrics_);
  ASSERT_GE(types.size(), 40u) << metrics_;  // the library's and the gateway's families
  EXPECT_TRUE(types.count("holdback_flow_control_revocations_total")) << "eviction families";
  std::ifstream in(std::string(HOLDBACK_SOURCE_DIR) + "/docs/reference/metrics.md");
  ASSERT_TRUE(in) << "docs/reference/metrics.md";
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [name, type] : types) {
    const std::string row = "| `" + name + "` | " + type + " |";
    EXPECT_NE(page.find(row), std::string::npos) << "no row \"" << row << "\" in the reference";
  }
}

}  // namespace
}  // namespace holdback_e2e
