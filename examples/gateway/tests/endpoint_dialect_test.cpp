// The gateway's dialect choice (endpoint_dialect.hpp): the flags resolved against the built-in
// dialects, detection, re-detection when a server comes back as another engine, and a
// configured mapping that names metrics the server lacks.
#include "endpoint_dialect.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace holdback::gateway {
namespace {

Options twoEndpoints() {
  Options o;
  o.endpointUrls = {"http://127.0.0.1:8001", "http://127.0.0.1:8002"};
  return o;
}

TEST(EndpointDialectTest, FlagsResolvePerPoolAndPerEndpoint) {
  Options o = twoEndpoints();
  o.dialect = "sglang";
  o.endpointDialects = {{"http://127.0.0.1:8002/", "tgi"}};
  std::vector<std::string> errors;
  const DialectChoices c = resolveDialects(o, errors);
  ASSERT_TRUE(errors.empty()) << errors.front();
  ASSERT_NE(c.forEndpoint(0).dialect, nullptr);
  EXPECT_EQ(c.forEndpoint(0).dialect->name, "sglang");
  EXPECT_EQ(c.forEndpoint(1).dialect->name, "tgi");
  EXPECT_EQ(c.forEndpoint(1).path, "--endpoint-dialect http://127.0.0.1:8002/=tgi");
}

TEST(EndpointDialectTest, BadFlagsAreAllReported) {
  Options o = twoEndpoints();
  o.dialect = "vllm2";
  o.endpointDialects = {{"http://elsewhere:1", "tgi"}};
  o.metricSpecs = {{"--metric-kv-usage", "kv{a=}"}};
  std::vector<std::string> errors;
  (void)resolveDialects(o, errors);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0], "--metric-kv-usage: \"kv{a=}\" at 5: expected a label value");
  EXPECT_NE(errors[1].find("needs --metric-waiting"), std::string::npos) << errors[1];
  EXPECT_EQ(errors[2],
            "--dialect vllm2: \"vllm2\" is not a dialect (allowed: auto, custom, vllm, vllm-v0, "
            "sglang, llamacpp, tgi, trtllm)");
  EXPECT_NE(errors[3].find("is not one of the --endpoint URLs"), std::string::npos) << errors[3];
}

TEST(EndpointDialectTest, DetectsAndRedetectsAServerRestartedAsAnotherEngine) {
  std::vector<std::string> errors;
  const DialectChoices c = resolveDialects(twoEndpoints(), errors);
  EndpointDialect ed(c.forEndpoint(0), "http://127.0.0.1:8001");
  EXPECT_EQ(ed.name(), "");
  auto t = ed.read(parsePrometheusText(
      "vllm:num_requests_waiting{model_name=\"m\"} 3\nvllm:kv_cache_usage_perc 0.5\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(ed.name(), "vllm");
  EXPECT_EQ(t->waiting, 3.0);
  EXPECT_EQ(t->kvCacheUsage, 0.5);
  // Restarted as llama.cpp server.
  t =
      ed.read(parsePrometheusText("llamacpp:requests_deferred 4\nllamacpp:requests_processing 2\n"
                                  "llamacpp:kv_cache_usage_ratio 0.25\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(ed.name(), "llamacpp");
  EXPECT_EQ(t->waiting, 4.0);
  EXPECT_EQ(t->running, 2.0);
  EXPECT_EQ(t->kvCacheUsage, 0.25);
  // Something else entirely: a failed scrape, the last dialect kept for the label.
  EXPECT_FALSE(ed.read(parsePrometheusText("process_cpu_seconds_total 1\n")).has_value());
  EXPECT_EQ(ed.name(), "llamacpp");
  // TGI has no KV gauge: it reads as 0 and the queue alone gates.
  t = ed.read(parsePrometheusText("tgi_queue_size 6\ntgi_batch_current_size 8\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(ed.name(), "tgi");
  EXPECT_EQ(t->kvCacheUsage, 0.0);
}

TEST(EndpointDialectTest, ConfiguredMappingNamingAbsentMetricsIsAnErrorWithItsPath) {
  Options o = twoEndpoints();
  o.metricSpecs = {{"--metric-waiting", "my_queue{pool=\"a\"}"},
                   {"--metric-kv-usage", "my_kv_percent %"}};
  std::vector<std::string> errors;
  const DialectChoices c = resolveDialects(o, errors);
  ASSERT_TRUE(errors.empty());
  EndpointDialect ed(c.forEndpoint(1), "http://127.0.0.1:8002");
  EXPECT_EQ(ed.name(), "custom");
  EXPECT_FALSE(ed.read(parsePrometheusText("my_queue{pool=\"b\"} 1\nmy_kv_percent 30\n")));
  ASSERT_EQ(ed.mappingErrors().size(), 1u);
  EXPECT_EQ(ed.mappingErrors()[0],
            "--metric-*/waiting: none of my_queue{pool=\"a\"} is in the scrape");
  const auto t = ed.read(parsePrometheusText("my_queue{pool=\"a\"} 2\nmy_kv_percent 30\n"));
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(ed.mappingErrors().empty());
  EXPECT_EQ(t->waiting, 2.0);
  EXPECT_DOUBLE_EQ(t->kvCacheUsage, 0.3);
}

TEST(EndpointDialectTest, DialectFileNamesAreChosenByNameWithTheFilePathInErrors) {
  const std::string file = testing::TempDir() + "/endpoint_dialect_test_dialects.json";
  std::ofstream(file) << R"({"dialects": [{"name": "mine", "waiting": "my_queue"}]})";
  Options o = twoEndpoints();
  o.dialectFile = file;
  o.endpointDialects = {{"http://127.0.0.1:8001", "mine"}};
  std::vector<std::string> errors;
  const DialectChoices c = resolveDialects(o, errors);
  ASSERT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(c.forEndpoint(1).dialect, nullptr);  // auto
  EndpointDialect ed(c.forEndpoint(0), "http://127.0.0.1:8001");
  EXPECT_EQ(ed.name(), "mine");
  EXPECT_FALSE(ed.read(parsePrometheusText("other_queue 1\n")));
  ASSERT_EQ(ed.mappingErrors().size(), 1u);
  EXPECT_EQ(ed.mappingErrors()[0],
            file + ":/dialects/0/waiting: none of my_queue is in the scrape");
  EXPECT_EQ(ed.read(parsePrometheusText("my_queue 4\n"))->waiting, 4.0);

  std::ofstream(file) << R"({"dialects": [{"name": "mine"}]})";
  errors.clear();
  (void)resolveDialects(o, errors);
  // The file's error, then the name it no longer provides.
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], file + ":/dialects/0/waiting: required (the queue holdback gates on)");
  EXPECT_NE(errors[1].find("\"mine\" is not a dialect"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace holdback::gateway
