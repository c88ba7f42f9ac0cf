#include "gateway_http.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/eviction.hpp"
#include "holdback/policy/reservation.hpp"

namespace holdback::gateway {
namespace {

struct MappingCase {
  Outcome outcome;
  bool poolEmpty;
  int status;
  const char* dropReason;
};

class OutcomeMapping : public ::testing::TestWithParam<MappingCase> {};

TEST_P(OutcomeMapping, StatusDropReasonAndJsonBody) {
  const MappingCase& c = GetParam();
  const Reply reply = replyForOutcome(c.outcome, c.poolEmpty);
  EXPECT_EQ(reply.status, c.status);
  EXPECT_EQ(reply.dropReason, c.dropReason);
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << reply.body;
  EXPECT_EQ(body["error"]["code"], c.status);
  const std::string message = body["error"]["message"];
  EXPECT_NE(message.find(std::string(toString(c.outcome.kind))), std::string::npos) << message;
}

using QO = QueueOutcome;
using OC = OutcomeCause;
// Outcomes to HTTP as the Go endpoint picker maps them (docs/guide/gateway.md, "Status codes").
INSTANTIATE_TEST_SUITE_P(
    ReferenceTable, OutcomeMapping,
    ::testing::Values(
        MappingCase{
            {QO::kRejectedCapacity, OC::kQueueAtCapacity}, false, 429, "rejected-saturated"},
        MappingCase{
            {QO::kRejectedNoEndpoints, OC::kNoEndpoints}, false, 503, "rejected-no-endpoints"},
        MappingCase{
            {QO::kEvictedNoEndpoints, OC::kNoEndpoints}, false, 503, "rejected-no-endpoints"},
        MappingCase{{QO::kEvictedTtl, OC::kTtlExpired}, true, 503, "rejected-no-endpoints"},
        MappingCase{{QO::kEvictedTtl, OC::kTtlExpired}, false, 429, "rejected-ttl-expired"},
        MappingCase{
            {QO::kEvictedCancelled, OC::kCancelled}, false, 503, "rejected-context-cancelled"},
        MappingCase{{QO::kRejectedOther, OC::kNotRunning}, false, 503, "rejected-shutting-down"},
        MappingCase{{QO::kEvictedOther, OC::kNotRunning}, false, 503, "rejected-shutting-down"},
        MappingCase{{QO::kEvictedOther, OC::kTtlExpired}, false, 429, "rejected-ttl-expired"},
        MappingCase{{QO::kRejectedOther, OC::kCancelled}, false, 503, "rejected-context-cancelled"},
        MappingCase{{QO::kRejectedOther, OC::kInvalidRequest}, false, 500, ""}));

TEST(UpstreamFailure, Is502WithoutDropReason) {
  const Reply reply = replyForUpstreamFailure("http://127.0.0.1:9", "Connection");
  EXPECT_EQ(reply.status, 502);
  EXPECT_TRUE(reply.dropReason.empty());
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded());
  EXPECT_EQ(body["error"]["code"], 502);
  EXPECT_EQ(body["error"]["message"], "upstream http://127.0.0.1:9 failed: Connection");
}

TEST(Eviction, Is429EvictedWithAnOpenAiErrorBodyAndTheSameErrorAsOneEvent) {
  const Reply reply = replyForEviction(kEvictedHttp);
  EXPECT_EQ(reply.status, 429);
  EXPECT_EQ(reply.dropReason, "evicted");
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << reply.body;
  EXPECT_EQ(body["error"]["code"], 429);
  EXPECT_EQ(body["error"]["type"], "rate_limit_exceeded");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("evicted"), std::string::npos);
  // Streaming: one SSE event carrying the same body, then the blank line that ends it.
  const std::string event = evictionEvent(kEvictedHttp);
  EXPECT_EQ(event, "data: " + reply.body + "\n\n");
}

TEST(ErrorBody, InvalidUtf8IsReplacedNotThrown) {
  const std::string body = errorBody(400, "invalid_request_error", "bad \xff byte");
  EXPECT_FALSE(nlohmann::json::parse(body, nullptr, false).is_discarded());
}

TEST(Objectives, BuiltinsUnknownAndOverrides) {
  ObjectiveTable t = ObjectiveTable::builtin();
  EXPECT_EQ(t.priorityOf("interactive"), 10);
  EXPECT_EQ(t.priorityOf("batch"), -1);
  EXPECT_EQ(t.priorityOf(""), 0);
  EXPECT_EQ(t.priorityOf("unknown"), 0);
  EXPECT_TRUE(t.set("batch=-20"));
  EXPECT_TRUE(t.set("premium=2147483647"));
  EXPECT_EQ(t.priorityOf("batch"), -20);
  EXPECT_EQ(t.priorityOf("premium"), 2147483647);
  std::string error;
  for (const char* bad : {"noequals", "=5", "x=", "x=1.5", "x=2147483648", "x=abc"}) {
    EXPECT_FALSE(t.set(bad, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
  EXPECT_EQ(t.entries().size(), 3u);
}

TEST(FlowId, PrimaryThenAliasThenDefault) {
  EXPECT_EQ(flowIdFrom("tenant-a", "tenant-b"), "tenant-a");
  EXPECT_EQ(flowIdFrom("", "tenant-b"), "tenant-b");
  EXPECT_EQ(flowIdFrom("", ""), "default-flow");
}

TEST(InferencePaths, VllmsOpenAiPostRoutesExactly) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/embeddings",
                        "/v1/responses", "/v1/rerank", "/v1/score"}) {
    EXPECT_TRUE(isInferencePath(p)) << p;
  }
  for (const char* p : {"/v1/models", "/metrics", "/v1/completions/", "/v1/completion",
                        "/V1/completions", "", "/", "/v1/chat/completions/x"}) {
    EXPECT_FALSE(isInferencePath(p)) << p;
  }
}

TEST(OriginForm, AbsoluteFormLosesSchemeAndAuthorityOtherTargetsStay) {
  EXPECT_EQ(originForm("http://127.0.0.1:8000/v1/completions"), "/v1/completions");
  EXPECT_EQ(originForm("HTTPS://gw.example/v1/chat/completions?x=1"), "/v1/chat/completions?x=1");
  EXPECT_EQ(originForm("http://user@host:1/healthz"), "/healthz");
  EXPECT_EQ(originForm("http://host"), "/");
  EXPECT_EQ(originForm("http://host?x=1"), "/");
  EXPECT_EQ(originForm("/v1/completions"), "/v1/completions");
  EXPECT_EQ(originForm("/v1/completions?next=http://x/y"), "/v1/completions?next=http://x/y");
  EXPECT_EQ(originForm("ftp://host/v1/completions"), "ftp://host/v1/completions");
  EXPECT_EQ(originForm("*"), "*");
  EXPECT_EQ(originForm(""), "");
}

TEST(Addresses, HostPortAndEndpointUrls) {
  auto hp = parseHostPort("127.0.0.1:0");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 0);
  EXPECT_FALSE(parseHostPort("127.0.0.1"));
  EXPECT_FALSE(parseHostPort(":80"));
  EXPECT_FALSE(parseHostPort("h:65536"));
  auto url = parseEndpointUrl("http://127.0.0.1:8001/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8001);
  EXPECT_FALSE(parseEndpointUrl("https://127.0.0.1:8001"));
  EXPECT_FALSE(parseEndpointUrl("http://127.0.0.1:0"));
  EXPECT_FALSE(parseEndpointUrl("http://127.0.0.1:8001/v1"));
  EXPECT_FALSE(parseEndpointUrl("127.0.0.1:8001"));
}

}  // namespace
}  // namespace holdback::gateway

namespace holdback::gateway {
namespace {

TEST(DefaultConfig, LoadsWithoutWarningsAndKeepsStalenessAboveTheScrapeInterval) {
  const auto loaded = config::loadEndpointPickerConfigText(kDefaultConfigText);
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_TRUE(loaded.diagnostics().empty()) << loaded.diagnostics().toString();
  const config::ConfigBundle& bundle = *loaded.value();
  EXPECT_TRUE(bundle.flowControlEnabled);
  const auto* detector = dynamic_cast<const UtilizationDetector*>(bundle.detector.get());
  ASSERT_NE(detector, nullptr);
  // A batch request may start below the KV threshold and run past it; with replicas the
  // controller takes turns per server (pool_pressure.hpp), whatever the configuration.
  EXPECT_TRUE(detector->options().kvStartPastThreshold);
  // The default scrape interval is 50 ms; #2514: a threshold at or below it is stale by design.
  EXPECT_GE(detector->options().metricsStalenessThreshold, std::chrono::milliseconds(500));
  // The built-in objectives' priorities are declared bands, so the policy sees all three.
  const ObjectiveTable objectives = ObjectiveTable::builtin();
  std::vector<Priority> declared;
  for (const BandOptions& band : bundle.controller.bands) declared.push_back(band.priority);
  for (const auto& [name, priority] : objectives.entries()) {
    EXPECT_NE(std::find(declared.begin(), declared.end(), priority), declared.end()) << name;
  }
  EXPECT_NE(std::find(declared.begin(), declared.end(), 0), declared.end());
  // The recommended configuration: the reservation policy with its reserve restored by eviction.
  EXPECT_EQ(bundle.policy->type(), ReservationPolicy::kType);
  EXPECT_TRUE(bundle.controller.eviction.enabled);
  EXPECT_TRUE(bundle.controller.eviction.restoreReserve.enabled);
  EXPECT_FALSE(bundle.controller.eviction.revokeOnBlock);
}

TEST(DefaultConfig, TheStepwiseFileIsThePreviousBuiltInAndStillLoads) {
  const auto loaded = config::loadEndpointPickerConfigFile(HOLDBACK_GATEWAY_SOURCE_DIR
                                                           "/../configs/stepwise-gateway.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.diagnostics().toString();
  EXPECT_TRUE(loaded.diagnostics().empty()) << loaded.diagnostics().toString();
  // Progressive: batch is gated strictly before interactive.
  std::vector<Priority> priorities{10, 0, -1};
  std::vector<double> ceilings(3, 1.0);
  loaded.value()->policy->computeLimit(0.6, priorities, ceilings);
  EXPECT_EQ(ceilings[0], 1.0);
  EXPECT_LT(ceilings[2], ceilings[0]);
  EXPECT_TRUE(isGated(0.6, ceilings[2]));
  EXPECT_FALSE(isGated(0.6, ceilings[0]));
}

TEST(RetryAfter, IsTheQueueDrainTimeAtTheDispatchRateClampedToOneToSixtySeconds) {
  // (queued + 1) / rate, rounded up.
  EXPECT_EQ(retryAfterSeconds(0, 100.0), 1);
  EXPECT_EQ(retryAfterSeconds(199, 100.0), 2);
  EXPECT_EQ(retryAfterSeconds(200, 100.0), 3);
  // No recent dispatches: the rate counts as 1/s.
  EXPECT_EQ(retryAfterSeconds(9, 0.0), 10);
  EXPECT_EQ(retryAfterSeconds(9, 0.5), 10);
  // Clamped.
  EXPECT_EQ(retryAfterSeconds(10000, 1.0), 60);
}

TEST(ReplyForError, HasTheOpenAiErrorShape) {
  const Reply r = replyForError(413, "invalid_request_error", "request body too large");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(
      r.body,
      R"({"error":{"code":413,"message":"request body too large","type":"invalid_request_error"}})");
  EXPECT_EQ(r.retryAfterS, 0);
}

TEST(CompletionBody, IsAnObjectAndReadsOnlyTheTopLevelStreamFlag) {
  const auto scan = [](std::string_view body) {
    const CompletionBody b = scanCompletionBody(body);
    return std::pair{b.object, b.stream};
  };
  EXPECT_EQ(scan(R"({"prompt": "hi", "max_tokens": 4})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"prompt": "hi", "stream": true})"), std::pair(true, true));
  EXPECT_EQ(scan(R"({"stream": false})"), std::pair(true, false));
  // Only a boolean counts, and only at the top level.
  EXPECT_EQ(scan(R"({"stream": "true"})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"stream": 1})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"stream": {"stream": true}})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"o": {"stream": true}, "a": [{"stream": true}, true]})"),
            std::pair(true, false));
  EXPECT_EQ(scan(R"({"messages": [{"role": "user"}], "stream": true, "n": 1})"),
            std::pair(true, true));
  // The last duplicate key wins, as in a parsed document.
  EXPECT_EQ(scan(R"({"stream": true, "stream": false})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"stream": true, "stream": "yes"})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"stream": true, "stream": [true]})"), std::pair(true, false));
  EXPECT_EQ(scan(R"({"stream": false, "stream": true})"), std::pair(true, true));
  // Not one JSON object: a 400.
  EXPECT_EQ(scan(""), std::pair(false, false));
  EXPECT_EQ(scan("[1, 2]"), std::pair(false, false));
  EXPECT_EQ(scan(R"("stream")"), std::pair(false, false));
  EXPECT_EQ(scan("42"), std::pair(false, false));
  EXPECT_EQ(scan(R"({"stream": true)"), std::pair(false, false));
  EXPECT_EQ(scan(R"({"stream": true} {})"), std::pair(false, false));
  EXPECT_EQ(scan(R"({"stream": true} x)"), std::pair(false, false));
  EXPECT_EQ(scan("{\"p\": \"\xff\"}"), std::pair(false, false));  // invalid UTF-8
}

// ---------------------------------------------------------------------------------------------
// Served tokens of a streamed response (program-aware-fairness)

std::string sseEvent(const std::string& data) {
  return "data: " + data + "\n\n";
}

// A body nested deeper than kMaxJsonNesting is refused (tooDeep) before anything walks it; one
// at the limit is read as usual.
TEST(CompletionBody, NestingBeyondTheLimitIsRefusedAtTheLimitRead) {
  const auto nested = [](std::size_t levels) {  // the object plus `levels` - 1 arrays
    return R"({"stream": true, "x": )" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  const CompletionBody at = scanCompletionBody(nested(kMaxJsonNesting));
  EXPECT_TRUE(at.object);
  EXPECT_FALSE(at.tooDeep);
  EXPECT_TRUE(at.stream);
  for (const std::size_t levels : {kMaxJsonNesting + 1, std::size_t{200000}}) {
    const CompletionBody deep = scanCompletionBody(nested(levels));
    EXPECT_FALSE(deep.object) << levels;
    EXPECT_TRUE(deep.tooDeep) << levels;
  }
  EXPECT_FALSE(scanCompletionBody("{").tooDeep);  // a syntax error is not a depth error
}

TEST(FairnessId, AtMost256BytesOfUtf8WithoutControlCharacters) {
  EXPECT_EQ(checkFairnessId("default-flow"), std::nullopt);
  EXPECT_EQ(checkFairnessId("tenant \"a\\b\" \xc2\xb5"), std::nullopt);
  EXPECT_EQ(checkFairnessId(std::string(kMaxFairnessIdBytes, 'x')), std::nullopt);
  const auto too_long = checkFairnessId(std::string(kMaxFairnessIdBytes + 1, 'x'));
  ASSERT_TRUE(too_long);
  EXPECT_NE(too_long->find("257 bytes"), std::string::npos) << *too_long;
  EXPECT_NE(too_long->find("at most 256"), std::string::npos) << *too_long;
  const auto not_utf8 = checkFairnessId(
      "\xff\xfe\x80"
      "bad");
  ASSERT_TRUE(not_utf8);
  EXPECT_NE(not_utf8->find("UTF-8"), std::string::npos) << *not_utf8;
  EXPECT_TRUE(checkFairnessId(std::string("a\0b", 3)));
  EXPECT_TRUE(checkFairnessId("tab\there"));
  EXPECT_TRUE(checkFairnessId("del\x7f"));
}

TEST(StreamUsageScanner, UsageEventGivesExactFiguresWhereverTheStreamIsSplit) {
  std::string stream;
  for (int i = 0; i < 5; ++i) {
    stream +=
        sseEvent(R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":"t"}]})");
  }
  stream += sseEvent(
      R"({"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})");
  stream += sseEvent("[DONE]");
  // Every split point, and byte by byte.
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    StreamUsageScanner s;
    s.feed(std::string_view(stream).substr(0, cut));
    s.feed(std::string_view(stream).substr(cut));
    ASSERT_TRUE(s.exact()) << cut;
    EXPECT_EQ(s.promptTokens(1000), 12u);
    EXPECT_EQ(s.completionTokens(), 5u);
    EXPECT_EQ(s.contentEvents(), 5u);
  }
  StreamUsageScanner bytewise;
  for (const char c : stream) bytewise.feed(std::string_view(&c, 1));
  EXPECT_TRUE(bytewise.exact());
  EXPECT_EQ(bytewise.completionTokens(), 5u);
}

TEST(StreamUsageScanner, WithoutAUsageEventCountsContentEventsAndEstimatesThePrompt) {
  StreamUsageScanner s;
  EXPECT_FALSE(s.known());
  s.feed(": a comment\r\n\r\n");
  s.feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n");
  s.feed("data:{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n");
  // "usage": null (servers that always send the field) is not a usage event.
  s.feed("data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}],\"usage\":null}\n\n");
  s.feed("data: [DONE]\n\n");
  EXPECT_TRUE(s.known());
  EXPECT_FALSE(s.exact());
  EXPECT_EQ(s.completionTokens(), 3u);
  EXPECT_EQ(s.promptTokens(400), 100u);  // body bytes / 4
}

TEST(StreamUsageScanner, AnOverlongLineIsSkippedAndTheNextLinesCount) {
  StreamUsageScanner s;
  s.feed("data: ");
  const std::string junk(StreamUsageScanner::kMaxLineBytes, 'x');
  s.feed(junk);
  s.feed(junk);  // still the same line: skipped without growing
  s.feed("\n\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n");
  EXPECT_EQ(s.completionTokens(), 1u);
  EXPECT_FALSE(s.exact());
}

}  // namespace
}  // namespace holdback::gateway

namespace holdback::gateway {
namespace {

// scanResponseUsage reads in one pass what a parsed document gave: the last top-level "usage"
// object's non-negative integer counts (else 0), nothing for anything else or past the nesting
// limit.
TEST(ResponseUsage, OnePassMatchesTheParsedDocument) {
  const auto reference = [](std::string_view body) -> std::optional<ResponseUsage> {
    if (jsonNestingExceeds(body, kMaxJsonNesting)) return std::nullopt;
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (!doc.is_object() || !doc.contains("usage") || !doc["usage"].is_object()) {
      return std::nullopt;
    }
    const auto& usage = doc["usage"];
    const auto count = [&](const char* key) -> std::uint64_t {
      return usage.contains(key) && usage[key].is_number_unsigned()
                 ? usage[key].get<std::uint64_t>()
                 : 0;
    };
    return ResponseUsage{count("prompt_tokens"), count("completion_tokens")};
  };
  std::string deep = R"({"usage":{"prompt_tokens":1,"x":)";
  for (std::size_t i = 0; i < kMaxJsonNesting; ++i) deep += "[";
  for (std::size_t i = 0; i < kMaxJsonNesting; ++i) deep += "]";
  deep += "}}";
  const std::vector<std::string> bodies = {
      R"({"id":"c","choices":[{"text":"hi"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}})",
      R"({"usage":{"prompt_tokens":3}})",
      R"({"usage":{"completion_tokens":4,"prompt_tokens_details":{"prompt_tokens":9}}})",
      R"({"usage":{"prompt_tokens":-3,"completion_tokens":4.5}})",
      R"({"usage":{"prompt_tokens":"3","completion_tokens":[4]}})",
      R"({"usage":{"prompt_tokens":{"n":3},"completion_tokens":null}})",
      R"({"usage":{"prompt_tokens":1,"prompt_tokens":2}})",
      R"({"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}})",
      R"({"usage":{"prompt_tokens":1},"usage":5})",
      R"({"usage":5,"usage":{"prompt_tokens":1}})",
      R"({"usage":[{"prompt_tokens":1}]})",
      R"({"choices":[{"usage":{"prompt_tokens":1}}]})",
      R"([{"usage":{"prompt_tokens":1}}])",
      R"({"usage":{"prompt_tokens":18446744073709551615}})",
      R"({"usage":{"prompt_tokens":1}} trailing)",
      R"({"usage":{"prompt_tokens":1})",
      "",
      "not json",
      deep,
      "[" + deep + "]",
  };
  for (const std::string& body : bodies) {
    const auto want = reference(body);
    const auto got = scanResponseUsage(body);
    ASSERT_EQ(got.has_value(), want.has_value()) << body;
    if (want) {
      EXPECT_EQ(got->promptTokens, want->promptTokens) << body;
      EXPECT_EQ(got->completionTokens, want->completionTokens) << body;
    }
  }
}

}  // namespace
}  // namespace holdback::gateway
