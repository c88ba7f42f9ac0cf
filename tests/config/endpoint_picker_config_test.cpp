#include "holdback/config/endpoint_picker_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "holdback/config/effective_config.hpp"
#include "holdback/core/duration.hpp"
#include "holdback/flow/flow_controller.hpp"

#include "golden_files.hpp"

namespace holdback::config {
namespace {

namespace fs = std::filesystem;

using test_support::kGoldenDir;
using test_support::readFile;

// What a golden .expected file holds: every diagnostic, then "ok" and the stack, or "invalid".
std::string render(const BundleResult& result) {
  std::string out = result.diagnostics().toString();
  if (!out.empty() && out.back() != '\n') out += '\n';
  if (!result) return out + "invalid\n";
  return out + "ok\n" + describeBundle(*result.value());
}

TEST(EndpointPickerConfigGoldenTest, EveryConfigMatchesItsExpectedResult) {
  // HOLDBACK_UPDATE_GOLDEN=1 rewrites the .expected files (review the diff before committing).
  const bool update = std::getenv("HOLDBACK_UPDATE_GOLDEN") != nullptr;
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".yaml" && path.extension() != ".json") continue;
    const fs::path expected_path = path.string() + ".expected";
    const std::string actual = render(loadEndpointPickerConfigFile(path.string()));
    if (update) {
      std::ofstream(expected_path, std::ios::binary) << actual;
    }
    ASSERT_TRUE(fs::exists(expected_path)) << expected_path;
    EXPECT_EQ(actual, readFile(expected_path)) << "golden file " << path.filename();
    ++checked;
  }
  EXPECT_GE(checked, 10u);
}

// The same config as YAML and as JSON (the YAML document re-serialized) builds the same stack.
void expectSameStack(const ConfigBundle& a, const ConfigBundle& b) {
  EXPECT_EQ(describeBundle(a), describeBundle(b));
  const std::vector<std::vector<Priority>> domains = {{0}, {100, 0, -10}, {100, 50, 0, -1, -10}};
  for (const auto& priorities : domains) {
    for (double s : {0.0, 0.3, 0.55, 0.8, 0.99, 1.0, 1.5}) {
      std::vector<double> ca(priorities.size(), 1.0), cb(priorities.size(), 1.0);
      a.policy->computeLimit(s, priorities, ca);
      b.policy->computeLimit(s, priorities, cb);
      EXPECT_EQ(ca, cb) << "saturation " << s;
    }
  }
  const TimePoint now{std::chrono::seconds(100)};
  std::vector<Endpoint> pool(3);
  pool[0] = Endpoint{.name = "a", .updateTime = now, .waitingQueueSize = 2, .kvCacheUsage = 0.5};
  pool[1] = Endpoint{.name = "b",
                     .updateTime = now,
                     .waitingQueueSize = 9,
                     .kvCacheUsage = 0.9,
                     .inFlightRequests = 40};
  pool[2] = Endpoint{.name = "c", .updateTime = now - std::chrono::seconds(5)};
  EXPECT_EQ(a.detector->saturation(pool, now), b.detector->saturation(pool, now));
  EXPECT_EQ(a.detector->name(), b.detector->name());
  const FlowControllerOptions& oa = a.controller;
  const FlowControllerOptions& ob = b.controller;
  EXPECT_EQ(oa.maxBytes, ob.maxBytes);
  EXPECT_EQ(oa.maxRequests, ob.maxRequests);
  EXPECT_EQ(oa.defaultRequestTtl, ob.defaultRequestTtl);
  EXPECT_EQ(oa.noEndpointRequestTtl, ob.noEndpointRequestTtl);
  ASSERT_EQ(oa.bands.size(), ob.bands.size());
  for (std::size_t i = 0; i < oa.bands.size(); ++i) {
    EXPECT_EQ(oa.bands[i].priority, ob.bands[i].priority);
    EXPECT_EQ(oa.bands[i].maxBytes, ob.bands[i].maxBytes);
    EXPECT_EQ(oa.bands[i].maxRequests, ob.bands[i].maxRequests);
  }
}

TEST(EndpointPickerConfigRoundTripTest, YamlAndJsonOfTheSameConfigBuildTheSameStack) {
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    if (entry.path().extension() != ".yaml") continue;
    const auto yaml = loadEndpointPickerConfigFile(entry.path().string());
    if (!yaml) continue;
    const auto parsed = parseDocument(readFile(entry.path()));
    ASSERT_TRUE(parsed);
    ASSERT_EQ(parsed->format, DocumentFormat::kYaml);
    const std::string json_text = parsed->json.dump(2);
    const auto json = loadEndpointPickerConfigText(json_text);
    ASSERT_TRUE(json) << entry.path() << "\n" << json.diagnostics().toString();
    SCOPED_TRACE(entry.path().filename().string());
    expectSameStack(*yaml.value(), *json.value());
    // Same warnings, at the same paths (JSON has no line numbers).
    std::vector<std::string> wy, wj;
    for (const auto& w : yaml.diagnostics().warnings()) wy.push_back(w.path + w.message);
    for (const auto& w : json.diagnostics().warnings()) wj.push_back(w.path + w.message);
    EXPECT_EQ(wy, wj);
    ++checked;
  }
  EXPECT_GE(checked, 4u);
}

// Hand-written twins: X.yaml and X.json in tests/golden describe the same config.
TEST(EndpointPickerConfigRoundTripTest, HandWrittenYamlAndJsonTwinsBuildTheSameStack) {
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    if (entry.path().extension() != ".yaml") continue;
    fs::path twin = entry.path();
    twin.replace_extension(".json");
    if (!fs::exists(twin)) continue;
    const auto yaml = loadEndpointPickerConfigFile(entry.path().string());
    const auto json = loadEndpointPickerConfigFile(twin.string());
    ASSERT_TRUE(yaml && json) << yaml.diagnostics().toString() << json.diagnostics().toString();
    SCOPED_TRACE(twin.filename().string());
    expectSameStack(*yaml.value(), *json.value());
    ++checked;
  }
  EXPECT_GE(checked, 1u);
}

// The defaults the doc table states are the ones an empty flowControl block gets.
TEST(EndpointPickerConfigDocsTest, DocumentedDefaultsAreTheLoadersDefaults) {
  const auto loaded = loadEndpointPickerConfigFile((kGoldenDir / "defaults-only.json").string());
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const ConfigBundle& b = *loaded.value();
  std::map<std::string, std::string, std::less<>> defaults;
  for (const FieldInfo& f : kEndpointPickerConfigFields) {
    defaults.emplace(std::string(f.path), std::string(f.defaultValue));
  }
  const auto leadingNumber = [&](const std::string& path) {
    return std::stoull(defaults.at(path));
  };
  EXPECT_EQ(b.controller.maxBytes, leadingNumber("flowControl.maxBytes"));
  EXPECT_EQ(b.controller.maxRequests, leadingNumber("flowControl.maxRequests"));
  EXPECT_EQ(b.controller.defaultBand.maxBytes, leadingNumber("band.maxBytes"));
  EXPECT_EQ(b.controller.defaultBand.maxRequests, leadingNumber("band.maxRequests"));
  EXPECT_EQ(b.controller.defaultRequestTtl,
            parseDuration(defaults.at("flowControl.defaultRequestTTL")));
  EXPECT_EQ(defaults.at("flowControl.noEndpointRequestTTL"), "defaultRequestTTL");
  EXPECT_EQ(b.controller.noEndpointRequestTtl, b.controller.defaultRequestTtl);
  EXPECT_EQ(b.policy->name(), defaults.at("flowControl.usageLimitPolicyPluginRef"));
  EXPECT_EQ(b.detector->name(), defaults.at("flowControl.saturationDetector.pluginRef"));
  EXPECT_EQ(b.controller.bands.size(), 0u);
  EXPECT_FALSE(b.controller.defaultNegativeBand);
  const auto band = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "flowControl": {"priorityBands": [{"priority": 3}]}})");
  ASSERT_TRUE(band);
  const BandOptions& declared = band.value()->controller.bands.at(0);
  EXPECT_EQ(declared.maxBytes, leadingNumber("band.maxBytes"));
  EXPECT_EQ(declared.maxRequests, leadingNumber("band.maxRequests"));
  EXPECT_EQ(declared.fairness->type(), defaults.at("band.fairnessPolicyRef"));
  EXPECT_EQ(declared.ordering->type(), defaults.at("band.orderingPolicyRef"));
}

TEST(EndpointPickerConfigTest, ReferenceExampleBuildsItsBands) {
  const auto loaded = loadEndpointPickerConfigFile((kGoldenDir / "reference-full.yaml").string());
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const ConfigBundle& b = *loaded.value();
  EXPECT_TRUE(b.flowControlEnabled);
  EXPECT_EQ(b.policy->name(), "holdback");
  EXPECT_EQ(b.detector->name(), "util");
  ASSERT_EQ(b.controller.bands.size(), 2u);
  EXPECT_EQ(b.controller.bands[0].priority, 100);
  EXPECT_EQ(b.controller.bands[0].maxBytes, 500'000'000u);
  EXPECT_EQ(b.controller.bands[0].maxRequests, 1000u);
  EXPECT_EQ(b.controller.bands[0].fairness->type(), RoundRobinFairnessPolicy::kType);
  EXPECT_EQ(b.controller.bands[0].ordering->type(), EdfOrderingPolicy::kType);
  EXPECT_EQ(b.controller.bands[1].maxRequests, 5u);
  ASSERT_TRUE(b.controller.defaultNegativeBand);
  EXPECT_EQ(b.controller.defaultNegativeBand->maxRequests, 50u);
  EXPECT_EQ(b.controller.defaultBand.maxBytes, 1'000'000'000u);
  // The controller accepts the options once the host adds its collaborators.
  FlowControllerOptions o = b.controller;
  o.endpoints = std::make_shared<VectorEndpointSource>();
  o.onOutcome = [](Completion&&) {};
  auto controller = FlowController::create(o);
  ASSERT_TRUE(controller) << controller.diagnostics().toString();
  EXPECT_EQ(controller.value()->bandPriorities(), (std::vector<Priority>{100, 0, -10}));
}

TEST(EndpointPickerConfigTest, TtlResolutionFollowsTheReferenceTable) {
  const auto ttls = [](const std::string& fc) {
    const auto loaded = loadEndpointPickerConfigText(
        R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
            "featureGates": ["flowControl"], "flowControl": {)" +
        fc + "}}");
    EXPECT_TRUE(loaded) << loaded.diagnostics().toString();
    if (!loaded) return std::pair<Duration, Duration>{};
    return std::pair<Duration, Duration>{*loaded.value()->controller.defaultRequestTtl,
                                         *loaded.value()->controller.noEndpointRequestTtl};
  };
  using std::chrono::seconds;
  EXPECT_EQ(ttls(""), std::make_pair(Duration(seconds(60)), Duration(seconds(60))));
  EXPECT_EQ(ttls(R"("defaultRequestTTL": "5s")"),
            std::make_pair(Duration(seconds(5)), Duration(seconds(5))));
  EXPECT_EQ(ttls(R"("defaultRequestTTL": "5s", "noEndpointRequestTTL": "2m")"),
            std::make_pair(Duration(seconds(5)), Duration(seconds(120))));
  EXPECT_EQ(ttls(R"("defaultRequestTTL": "0s")"), std::make_pair(Duration(0), Duration(0)));
  EXPECT_EQ(ttls(R"("defaultRequestTTL": "5s", "noEndpointRequestTTL": "0s")"),
            std::make_pair(Duration(seconds(5)), Duration(0)));
}

TEST(EndpointPickerConfigTest, HostRegisteredTypesAreBuiltAndReferenced) {
  Registries registries;
  int made = 0;
  registries.ordering.add("lifo-ordering-policy", [&made](const PluginSpec& spec,
                                                          Diagnostics& diagnostics) {
    ParamReader params(spec.parameters, spec.parametersPath(), diagnostics);
    params.finish();
    ++made;
    struct Lifo final : OrderingPolicy {
      std::string_view type() const noexcept override { return "lifo-ordering-policy"; }
      bool less(const QueuedRequestView& a, const QueuedRequestView& b) const noexcept override {
        return a.enqueueTime > b.enqueueTime;
      }
    };
    return std::unique_ptr<OrderingPolicy>(std::make_unique<Lifo>());
  });
  const auto loaded = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "plugins": [{"name": "lifo", "type": "lifo-ordering-policy"}],
          "flowControl": {"priorityBands": [{"priority": 7, "orderingPolicyRef": "lifo"}]}})",
      registries);
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  EXPECT_EQ(made, 1);
  EXPECT_EQ(loaded.value()->controller.bands.at(0).ordering->type(), "lifo-ordering-policy");
  // Without the registration the same file names an unknown plugin type.
  const auto plain = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"], "plugins": [{"name": "lifo", "type": "lifo-ordering-policy"}],
          "flowControl": {"priorityBands": [{"priority": 7, "orderingPolicyRef": "lifo"}]}})");
  ASSERT_FALSE(plain);
  EXPECT_NE(plain.diagnostics().toString().find(
                "/flowControl/priorityBands/0/orderingPolicyRef: \"lifo\" names a plugin of type "
                "\"lifo-ordering-policy\", which is not an ordering policy"),
            std::string::npos)
      << plain.diagnostics().toString();
}

// Real Go files (shapes of the reference's own config-loader test cases): every field of the Go
// schema loads. Flow-control fields are strict, the rest warns.
TEST(EndpointPickerConfigTest, EveryGoSchemaFieldLoads) {
  const std::string go = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates:
- flowControl
- dataLayer
- prepareDataPlugins
- enableLegacyMetrics=false
- haPopulateNonLeaderDatastore=false
plugins:
- name: scorer
  type: prefix-cache-scorer
  parameters: {blockSize: 32}
- type: max-score-picker
- type: single-profile-handler
- type: openai-parser
- name: src
  type: metrics-data-source
- name: ext
  type: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: scorer
    weight: 50
  - pluginRef: max-score-picker
dataLayer:
  injectDefaults: false
  sources:
  - pluginRef: src
    extractors:
    - pluginRef: ext
data:
  sources: []
requestHandler:
  parsers:
  - pluginRef: openai-parser
parser:
  pluginRef: openai-parser
saturationDetector:
  pluginRef: utilization-detector
flowControl:
  maxBytes: "1024"
  defaultRequestTTL: 1m
  usageLimitPolicyPluginRef: static-usage-limit-policy
  saturationDetector:
    pluginRef: utilization-detector
)";
  const auto loaded = loadEndpointPickerConfigText(go);
  ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
  const ConfigBundle& b = *loaded.value();
  EXPECT_TRUE(b.flowControlEnabled);
  // The refs name undeclared defaults: the reference's loader adds them, so does holdback.
  EXPECT_EQ(b.policy->type(), "static-usage-limit-policy");
  EXPECT_EQ(b.detector->type(), "utilization-detector");
  EXPECT_EQ(b.controller.maxBytes, 1024u);
  std::set<std::string> warned;
  for (const Diagnostic& w : loaded.diagnostics().warnings()) warned.insert(w.path);
  for (const char* path : {"/featureGates/1", "/featureGates/2", "/featureGates/3",
                           "/featureGates/4", "/schedulingProfiles", "/dataLayer", "/data",
                           "/requestHandler", "/parser", "/plugins/0/type", "/plugins/3/type"}) {
    EXPECT_EQ(warned.count(path), 1u) << path << "\n" << loaded.diagnostics().toString();
  }
  // Flow-control fields stay strict, even next to the Go-only ones.
  const auto bad = loadEndpointPickerConfigText(go + "  maxRequest: 5\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.diagnostics().toString().find("/flowControl/maxRequest"), std::string::npos);
  // A gate the Go gateway does not register either is still an error.
  const auto gate = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["unknown-gate"]})");
  ASSERT_FALSE(gate);
  EXPECT_NE(gate.diagnostics().toString().find("feature gate 'unknown-gate' is unknown"),
            std::string::npos);
  // A declared plugin of the default's name wins over the default; an undeclared other name is
  // still an error.
  const auto declared = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"],
          "plugins": [{"type": "static-usage-limit-policy", "parameters": {"threshold": 0.5}}],
          "flowControl": {"usageLimitPolicyPluginRef": "static-usage-limit-policy"}})");
  ASSERT_TRUE(declared) << declared.diagnostics().toString();
  EXPECT_NE(describeBundle(*declared.value()).find("static-usage-limit-policy"), std::string::npos);
  const auto missing = loadEndpointPickerConfigText(
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
          "featureGates": ["flowControl"],
          "flowControl": {"usageLimitPolicyPluginRef": "holdback"}})");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.diagnostics().toString().find("\"holdback\" names no plugin"),
            std::string::npos);
}

// docs/guide/configuration.md's field table lists exactly kEndpointPickerConfigFields, with the
// same type, default and allowed values; and the loader's known keys are exactly those fields.
TEST(EndpointPickerConfigDocsTest, FieldTableMatchesTheCode) {
  const std::string doc =
      readFile(fs::path(HOLDBACK_SOURCE_DIR) / "docs" / "guide" / "configuration.md");
  const auto begin = doc.find("<!-- fields:begin -->");
  const auto end = doc.find("<!-- fields:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::istringstream table(doc.substr(begin, end - begin));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(table, line);) {
    if (!line.starts_with("| `")) continue;
    std::vector<std::string> cells;
    std::size_t pos = 1;
    while (pos < line.size()) {
      const auto next = line.find(" |", pos);
      if (next == std::string::npos) break;
      std::string cell = line.substr(pos, next - pos);
      cell.erase(0, cell.find_first_not_of(' '));
      if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`') {
        cell = cell.substr(1, cell.size() - 2);
      }
      cells.push_back(cell);
      pos = next + 2;
    }
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), kEndpointPickerConfigFields.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FieldInfo& f = kEndpointPickerConfigFields[i];
    ASSERT_EQ(rows[i].size(), 4u) << rows[i][0];
    EXPECT_EQ(rows[i][0], f.path);
    EXPECT_EQ(rows[i][1], f.type) << f.path;
    EXPECT_EQ(rows[i][2], f.defaultValue) << f.path;
    EXPECT_EQ(rows[i][3], f.allowed) << f.path;
  }

  // The loader's known keys, from its "unknown key" messages, are the documented ones.
  const auto knownKeys = [](const std::string& text, const std::string& path) {
    const auto loaded = loadEndpointPickerConfigText(text);
    for (const Diagnostic& d : loaded.diagnostics().errors()) {
      if (d.path != path) continue;
      const auto at = d.message.find("allowed keys: ");
      if (at == std::string::npos) continue;
      std::set<std::string> keys;
      std::istringstream list(d.message.substr(at + 14));
      for (std::string key; std::getline(list, key, ',');) {
        key.erase(0, key.find_first_not_of(' '));
        keys.insert(key);
      }
      return keys;
    }
    return std::set<std::string>{};
  };
  const auto documented = [](const std::string& prefix, bool nested) {
    std::set<std::string> keys;
    for (const FieldInfo& f : kEndpointPickerConfigFields) {
      const std::string path(f.path);
      if (!path.starts_with(prefix)) continue;
      std::string key = path.substr(prefix.size());
      if (!nested) key = key.substr(0, key.find('.'));
      keys.insert(key);
    }
    return keys;
  };
  const std::string head =
      R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig", "featureGates": ["flowControl"], )";
  EXPECT_EQ(knownKeys(head + R"("flowControl": {"zz": 1}})", "/flowControl/zz"),
            documented("flowControl.", false));
  EXPECT_EQ(knownKeys(head + R"("flowControl": {"priorityBands": [{"priority": 1, "zz": 1}]}})",
                      "/flowControl/priorityBands/0/zz"),
            documented("band.", true));
  std::set<std::string> top = knownKeys(head + R"("zz": 1})", "/zz");
  // Accepted-and-ignored Go fields and the deprecated saturationDetector are documented apart.
  for (const char* ignored : {"metadata", "schedulingProfiles", "dataLayer", "data",
                              "requestHandler", "parser", "saturationDetector"}) {
    EXPECT_EQ(top.erase(ignored), 1u) << ignored;
  }
  std::set<std::string> documented_top = documented("", false);
  documented_top.erase("band");
  EXPECT_EQ(top, documented_top);
}

// flowControl.enableEviction with the host's actuator: the bundle's options build a controller
// once the host adds evict; without it, create() names the missing callback.
TEST(EndpointPickerConfigEvictionTest, BundleEnablesEvictionAndTheHostAddsTheActuator) {
  const auto loaded = loadEndpointPickerConfigText(R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
  - name: conc
    type: concurrency-detector
flowControl:
  saturationDetector: {pluginRef: conc}
  enableEviction: true
  eviction: {maxRevocationsPerDecision: 3, confirmationTimeout: 5s}
)");
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  const ConfigBundle& bundle = *loaded.value();
  // Both keys are deprecated (upstream keeps them internal): a warning each, the values apply.
  ASSERT_EQ(bundle.warnings.all().size(), 2u) << bundle.warnings.toString();
  EXPECT_EQ(bundle.warnings.all()[0].path, "/flowControl/eviction/maxRevocationsPerDecision");
  EXPECT_EQ(bundle.warnings.all()[1].path, "/flowControl/eviction/confirmationTimeout");
  const EvictionOptions& e = bundle.controller.eviction;
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.maxRevocationsPerDecision, 3u);
  EXPECT_EQ(e.confirmationTimeout, std::chrono::seconds(5));
  EXPECT_EQ(e.confirmationGrace, kInFlightSensorEvictionGrace);  // derived: concurrency detector
  ASSERT_NE(e.filter, nullptr);
  EXPECT_EQ(e.filter->name(), "sheddable-eviction-filter");
  ASSERT_NE(e.order, nullptr);
  EXPECT_EQ(e.order->name(), "priority-then-time-eviction-order-policy");

  FlowControllerOptions o = bundle.controller;
  o.endpoints = std::make_shared<VectorEndpointSource>();
  o.onOutcome = [](Completion&&) {};
  auto without = FlowController::create(o);
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.diagnostics().toString().find("/eviction/evict"), std::string::npos);
  o.eviction.evict = [](const Revocation&) {};
  auto with = FlowController::create(std::move(o));
  ASSERT_TRUE(with.ok()) << with.diagnostics().toString();
  EXPECT_TRUE(with.value()->stats().eviction.enabled);
}

TEST(EndpointPickerConfigEvictionTest, GateOffLeavesEvictionOff) {
  const auto loaded = loadEndpointPickerConfigText(R"({"apiVersion": "llm-d.ai/v1alpha1",
    "kind": "EndpointPickerConfig", "flowControl": {"enableEviction": true}})");
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_TRUE(loaded.value()->enableEviction);  // as written
  EXPECT_FALSE(loaded.value()->controller.eviction.enabled);
}

// flowControl.eviction.revokeOnBlock and restoreReserve load into EvictionOptions: the block
// turns restoration on, `enabled: false` keeps it off, and the effective config shows both.
TEST(EndpointPickerConfigEvictionTest, RestoreReserveAndRevokeOnBlockLoad) {
  const std::string head = R"(
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
flowControl:
  enableEviction: true
  eviction:
)";
  const auto on = loadEndpointPickerConfigText(head + R"(
    revokeOnBlock: false
    restoreReserve: {epsilon: 0.05, leadTime: 80ms, burstMemory: 30s}
)");
  ASSERT_TRUE(on.ok()) << on.diagnostics().toString();
  const EvictionOptions& e = on.value()->controller.eviction;
  EXPECT_FALSE(e.revokeOnBlock);
  EXPECT_TRUE(e.restoreReserve.enabled);
  EXPECT_DOUBLE_EQ(e.restoreReserve.epsilon, 0.05);
  EXPECT_EQ(e.restoreReserve.leadTime, std::chrono::milliseconds(80));
  EXPECT_EQ(e.restoreReserve.burstMemory, std::chrono::seconds(30));
  const OrderedJson effective = effectiveConfig(*on.value())["eviction"];
  EXPECT_EQ(effective["revokeOnBlock"], false);
  EXPECT_EQ(effective["restoreReserve"]["enabled"], true);
  EXPECT_EQ(effective["restoreReserve"]["epsilon"], 0.05);
  EXPECT_EQ(effective["restoreReserve"]["leadTime"], "80ms");
  EXPECT_EQ(effective["restoreReserve"]["burstMemory"], "30s");
  EXPECT_NE(describeBundle(*on.value())
                .find("no head-of-line trigger, restore the reserve (epsilon 0.05, lead time 80ms, "
                      "burst memory 30s)"),
            std::string::npos)
      << describeBundle(*on.value());

  const auto off = loadEndpointPickerConfigText(head + R"(
    restoreReserve: {enabled: false, epsilon: 0.2}
)");
  ASSERT_TRUE(off.ok()) << off.diagnostics().toString();
  EXPECT_TRUE(off.value()->controller.eviction.revokeOnBlock);  // upstream's trigger by default
  EXPECT_FALSE(off.value()->controller.eviction.restoreReserve.enabled);
  EXPECT_DOUBLE_EQ(off.value()->controller.eviction.restoreReserve.epsilon, 0.2);

  const auto defaults = loadEndpointPickerConfigText(head + "    footprintAware: false\n");
  ASSERT_TRUE(defaults.ok()) << defaults.diagnostics().toString();
  EXPECT_TRUE(defaults.value()->controller.eviction.revokeOnBlock);
  EXPECT_FALSE(defaults.value()->controller.eviction.restoreReserve.enabled);
  const OrderedJson shown = effectiveConfig(*defaults.value())["eviction"];
  EXPECT_EQ(shown["revokeOnBlock"], true);
  EXPECT_EQ(shown["restoreReserve"]["enabled"], false);
  EXPECT_EQ(shown["restoreReserve"]["epsilon"], 0.01);
  EXPECT_EQ(shown["restoreReserve"]["leadTime"], "0s");
  EXPECT_EQ(shown["restoreReserve"]["burstMemory"], "0s");
}

// restoreReserve's budgets load, show in the effective configuration and the description only
// while on, and every bad value is reported with its path, the value and what is allowed.
TEST(EndpointPickerConfigEvictionTest, RestorationBudgetsLoadAndErrorsNameThePath) {
  const std::string head = R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
      "featureGates": ["flowControl"], "flowControl": {"enableEviction": true, "eviction":
      {"revokeOnBlock": false, "restoreReserve": )";
  const auto on = loadEndpointPickerConfigText(
      head + R"({"evictionBudget": 0.05, "evictionBurst": 3, "wasteBudget": 0.01,
                 "wasteBurst": "20s"}}}})");
  ASSERT_TRUE(on.ok()) << on.diagnostics().toString();
  const ReserveRestoreOptions& r = on.value()->controller.eviction.restoreReserve;
  EXPECT_DOUBLE_EQ(r.evictionBudget, 0.05);
  EXPECT_DOUBLE_EQ(r.evictionBurst, 3.0);
  EXPECT_DOUBLE_EQ(r.wasteBudget, 0.01);
  EXPECT_EQ(r.wasteBurst, std::chrono::seconds(20));
  const OrderedJson shown = effectiveConfig(*on.value())["eviction"]["restoreReserve"];
  EXPECT_EQ(shown["evictionBudget"], 0.05);
  EXPECT_EQ(shown["evictionBurst"], 3.0);
  EXPECT_EQ(shown["wasteBudget"], 0.01);
  EXPECT_EQ(shown["wasteBurst"], "20s");
  EXPECT_NE(
      describeBundle(*on.value())
          .find("at most 0.05 revocations per protected request (burst 3.0), at most 1.0 % of "
                "sheddable slot time wasted (burst 20s)"),
      std::string::npos)
      << describeBundle(*on.value());
  // Off by default: neither loaded nor shown.
  const auto off = loadEndpointPickerConfigText(head + "{}}}}");
  ASSERT_TRUE(off.ok()) << off.diagnostics().toString();
  EXPECT_EQ(off.value()->controller.eviction.restoreReserve.evictionBudget, 0.0);
  EXPECT_EQ(off.value()->controller.eviction.restoreReserve.wasteBudget, 0.0);
  const OrderedJson hidden = effectiveConfig(*off.value())["eviction"]["restoreReserve"];
  EXPECT_FALSE(hidden.contains("evictionBudget"));
  EXPECT_FALSE(hidden.contains("wasteBurst"));

  const auto bad = loadEndpointPickerConfigText(
      head + R"({"evictionBudget": 1.5, "evictionBurst": 0.5, "wasteBudget": 1,
                 "wasteBurst": "0s"}}}})");
  ASSERT_FALSE(bad.ok());
  std::map<std::string, std::string> e;
  for (const Diagnostic& d : bad.diagnostics().errors()) e[d.path] += d.message;
  ASSERT_EQ(e.size(), 4u) << bad.diagnostics().toString();
  const std::string base = "/flowControl/eviction/restoreReserve/";
  EXPECT_EQ(e[base + "evictionBudget"],
            "1.5 is outside [0, 1] (revocations per protected request started; 0 = no budget)");
  EXPECT_EQ(e[base + "evictionBurst"], "0.5 is outside [1, 1000] (revocations saved up)");
  EXPECT_NE(e[base + "wasteBudget"].find("1.0 is outside [0, 1)"), std::string::npos)
      << e[base + "wasteBudget"];
  EXPECT_EQ(e[base + "wasteBurst"], "must be positive, but got 0s");
}

// restoreReserve.burstSignificance loads, shows in the effective configuration and the
// description only while on, and a bad value is reported with its path and what is allowed.
TEST(EndpointPickerConfigEvictionTest, BurstTriggerLoadsAndErrorsNameThePath) {
  const std::string head = R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
      "featureGates": ["flowControl"], "flowControl": {"enableEviction": true, "eviction":
      {"revokeOnBlock": true, "restoreReserve": )";
  const auto on = loadEndpointPickerConfigText(head + R"({"burstSignificance": 3}}}})");
  ASSERT_TRUE(on.ok()) << on.diagnostics().toString();
  EXPECT_DOUBLE_EQ(on.value()->controller.eviction.restoreReserve.burstSignificance, 3.0);
  EXPECT_EQ(effectiveConfig(*on.value())["eviction"]["restoreReserve"]["burstSignificance"], 3.0);
  EXPECT_NE(describeBundle(*on.value()).find("only in a protected burst (significance 3.0)"),
            std::string::npos)
      << describeBundle(*on.value());
  const auto off = loadEndpointPickerConfigText(head + "{}}}}");
  ASSERT_TRUE(off.ok()) << off.diagnostics().toString();
  EXPECT_EQ(off.value()->controller.eviction.restoreReserve.burstSignificance, 0.0);
  EXPECT_FALSE(
      effectiveConfig(*off.value())["eviction"]["restoreReserve"].contains("burstSignificance"));
  for (const std::string value : {"-1", "101"}) {
    const auto bad =
        loadEndpointPickerConfigText(head + R"({"burstSignificance": )" + value + "}}}}");
    ASSERT_FALSE(bad.ok()) << value;
    std::map<std::string, std::string> e;
    for (const Diagnostic& d : bad.diagnostics().errors()) e[d.path] += d.message;
    const std::string message = e["/flowControl/eviction/restoreReserve/burstSignificance"];
    EXPECT_NE(message.find("is outside [0, 100]"), std::string::npos)
        << bad.diagnostics().toString();
  }
}

// Every mistake in the two keys at once, each with its path, the value and what is allowed.
TEST(EndpointPickerConfigEvictionTest, RestoreReserveAndRevokeOnBlockErrorsNameThePath) {
  const std::string head = R"({"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
      "featureGates": ["flowControl"], "flowControl": {"enableEviction": true, "eviction": )";
  const auto errors = [&](const std::string& eviction) {
    const auto loaded = loadEndpointPickerConfigText(head + eviction + "}}");
    EXPECT_FALSE(loaded.ok()) << eviction;
    std::map<std::string, std::string> out;
    for (const Diagnostic& d : loaded.diagnostics().errors()) out[d.path] += d.message;
    return out;
  };
  // Restoration off and the block trigger off: nothing could ever be revoked.
  auto e = errors(R"({"revokeOnBlock": false})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e["/flowControl/eviction/revokeOnBlock"],
            "false needs restoreReserve.enabled (otherwise nothing would ever be revoked)");

  e = errors(R"({"revokeOnBlock": "no", "restoreReserve": {"enabled": 1, "epsilon": 0.7,
                 "leadTime": "-5ms", "burstMemory": "-1s", "quantile": 0.99}})");
  ASSERT_EQ(e.size(), 6u);
  EXPECT_NE(
      e["/flowControl/eviction/revokeOnBlock"].find("\"no\" is a string; expected true or false"),
      std::string::npos);
  EXPECT_NE(e["/flowControl/eviction/restoreReserve/enabled"].find("1 is a number"),
            std::string::npos);
  EXPECT_EQ(e["/flowControl/eviction/restoreReserve/epsilon"], "must be in (0, 0.5], but got 0.7");
  EXPECT_NE(
      e["/flowControl/eviction/restoreReserve/leadTime"].find("cannot be negative, but got -5ms"),
      std::string::npos);
  EXPECT_NE(
      e["/flowControl/eviction/restoreReserve/burstMemory"].find("cannot be negative, but got -1s"),
      std::string::npos);
  EXPECT_NE(e["/flowControl/eviction/restoreReserve/quantile"].find(
                "allowed keys: burstMemory, burstSignificance, enabled, epsilon, evictionBudget, "
                "evictionBurst, leadTime, "
                "wasteBudget, wasteBurst"),
            std::string::npos);

  // Checked while restoration stays off too (reported once either way).
  e = errors(R"({"restoreReserve": {"enabled": false, "epsilon": 0}})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e["/flowControl/eviction/restoreReserve/epsilon"], "must be in (0, 0.5], but got 0.0");
  e = errors(R"({"restoreReserve": {"epsilon": 0}})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e["/flowControl/eviction/restoreReserve/epsilon"], "must be in (0, 0.5], but got 0.0");

  e = errors(R"({"restoreReserve": true})");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e["/flowControl/eviction/restoreReserve"].find(
                "expected an object {enabled, evictionBudget, evictionBurst, wasteBudget, "
                "wasteBurst, burstSignificance}"),
            std::string::npos)
      << e["/flowControl/eviction/restoreReserve"];
}

}  // namespace
}  // namespace holdback::config
