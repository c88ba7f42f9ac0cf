// The KV capacity parser (vllm:cache_config_info) and the capacity learning of the pool.
#include "capacity.hpp"

#include <cstdint>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gateway_http.hpp"
#include "holdback/detector/detectors.hpp"
#include "pool.hpp"
#include "vllm_telemetry.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

CacheConfigInfo cacheInfo(const std::string& text) {
  return extractCacheConfigInfo(parsePrometheusText(text));
}

TEST(CacheConfigInfo, ReadsVllmsInfoGauge) {
  // As vLLM writes it: every cache setting a label, the value 1.
  const CacheConfigInfo c = cacheInfo(
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
      "# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching="
      "\"True\",gpu_memory_utilization=\"0.9\",num_cpu_blocks=\"None\",num_gpu_blocks=\"2345\","
      "num_gpu_blocks_override=\"None\",sliding_window=\"None\",swap_space_bytes=\"4294967296\"} "
      "1.0\n");
  ASSERT_EQ(c.status, CacheConfigInfo::Status::kValid) << c.problem;
  EXPECT_EQ(c.numGpuBlocks, 2345);
  EXPECT_EQ(c.blockSize, 16);
  EXPECT_EQ(c.kvCapacityTokens, 2345 * 16);
}

TEST(CacheConfigInfo, AbsentWithoutTheGauge) {
  const CacheConfigInfo c = cacheInfo("vllm:num_requests_waiting 0\n");
  EXPECT_EQ(c.status, CacheConfigInfo::Status::kAbsent);
  EXPECT_EQ(c.kvCapacityTokens, 0);
}

TEST(CacheConfigInfo, AbsurdOrMissingValuesAreInvalidAndNamed) {
  struct Case {
    const char* labels;
    const char* inProblem;
  };
  const Case cases[] = {
      {R"(num_gpu_blocks="0",block_size="16")", "num_gpu_blocks=\"0\""},
      {R"(num_gpu_blocks="1e15",block_size="16")", "num_gpu_blocks=\"1e15\""},
      {R"(num_gpu_blocks="None",block_size="16")", "num_gpu_blocks=\"None\""},
      {R"(num_gpu_blocks="-5",block_size="16")", "num_gpu_blocks=\"-5\""},
      {R"(num_gpu_blocks="12.5",block_size="16")", "num_gpu_blocks=\"12.5\""},
      {R"(num_gpu_blocks="nan",block_size="16")", "num_gpu_blocks=\"nan\""},
      {R"(num_gpu_blocks="100",block_size="0")", "block_size=\"0\""},
      {R"(block_size="16")", "no num_gpu_blocks label"},
      {R"(num_gpu_blocks="100")", "no block_size label"},
      {R"(num_gpu_blocks="4294967296",block_size="1048576")", "is over"},
  };
  for (const Case& k : cases) {
    const CacheConfigInfo c =
        cacheInfo(std::string("vllm:cache_config_info{") + k.labels + "} 1\n");
    EXPECT_EQ(c.status, CacheConfigInfo::Status::kInvalid) << k.labels;
    EXPECT_EQ(c.kvCapacityTokens, 0) << k.labels;
    EXPECT_NE(c.problem.find(k.inProblem), std::string::npos) << k.labels << ": " << c.problem;
  }
}

TEST(CacheConfigInfo, IntegralFloatsAreAcceptedAndTheSmallestEngineWins) {
  const CacheConfigInfo c = cacheInfo(
      "vllm:cache_config_info{engine=\"0\",num_gpu_blocks=\"200.0\",block_size=\"16\"} 1\n"
      "vllm:cache_config_info{engine=\"1\",num_gpu_blocks=\"None\",block_size=\"16\"} 1\n"
      "vllm:cache_config_info{engine=\"2\",num_gpu_blocks=\"100\",block_size=\"16\"} 1\n");
  ASSERT_EQ(c.status, CacheConfigInfo::Status::kValid);
  EXPECT_EQ(c.kvCapacityTokens, 1600);
}

struct CapturedLog {
  std::vector<std::string> lines;
  CapacityLearner::Log log() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};

CacheConfigInfo validInfo(std::int64_t blocks, std::int64_t size = 16) {
  return {CacheConfigInfo::Status::kValid, blocks, size, blocks * size, {}};
}

TEST(CapacityLearner, SlotSettingsTakePrecedenceInOrderAndZeroMeansNotGiven) {
  CapturedLog log;
  const CapacityLearner learner({"a", "b", "c", "d"},
                                {{.endpoint = 8, .pool = 4, .config = 2},
                                 {.endpoint = 0, .pool = 4, .config = 2},
                                 {.endpoint = 0, .pool = 0, .config = 2},
                                 {}},
                                log.log());
  EXPECT_EQ(learner.learned(0).slots, 8);
  EXPECT_EQ(learner.learned(0).slotSource, SlotSource::kEndpointSetting);
  EXPECT_EQ(learner.learned(1).slots, 4);
  EXPECT_EQ(learner.learned(1).slotSource, SlotSource::kPoolSetting);
  EXPECT_EQ(learner.learned(2).slotSource, SlotSource::kConfig);
  EXPECT_EQ(learner.learned(3).slotSource, SlotSource::kEstimate);
  EXPECT_EQ(learner.initial(0).maxRunningRequests, 8);
  EXPECT_EQ(learner.initial(3).maxRunningRequests, 0);  // unknown until the first scrape
  ASSERT_EQ(log.lines.size(), 4u);
  EXPECT_NE(log.lines[3].find("estimated from the scrapes"), std::string::npos) << log.lines[3];
}

TEST(CapacityLearner, LearnsKvCapacityAndLogsOncePerChange) {
  CapturedLog log;
  CapacityLearner learner({"http://a"}, {{.endpoint = 4}}, log.log());
  log.lines.clear();
  auto installed = learner.observe(0, validInfo(64), 0.0, 0.0);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->kvCapacityTokens, 1024);
  EXPECT_EQ(installed->maxRunningRequests, 4);
  EXPECT_FALSE(learner.observe(0, validInfo(64), 0.0, 0.0).has_value());  // unchanged: nothing
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_EQ(log.lines[0],
            "http://a: KV cache 1024 tokens (vllm:cache_config_info: 64 blocks x 16)");
  EXPECT_EQ(learner.learned(0).kvSource, KvSource::kCacheConfigInfo);

  // A server that stops exporting it (or exports nonsense): unknown, logged once per problem.
  installed = learner.observe(0, {}, 0.0, 0.0);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->kvCapacityTokens, 0);
  EXPECT_FALSE(learner.observe(0, {}, 0.0, 0.0).has_value());
  const CacheConfigInfo bad =
      cacheInfo("vllm:cache_config_info{num_gpu_blocks=\"0\",block_size=\"16\"} 1\n");
  EXPECT_FALSE(learner.observe(0, bad, 0.0, 0.0).has_value());  // still unknown: nothing to install
  EXPECT_FALSE(learner.observe(0, bad, 0.0, 0.0).has_value());
  ASSERT_EQ(log.lines.size(), 3u);
  EXPECT_NE(log.lines[1].find("no vllm:cache_config_info"), std::string::npos) << log.lines[1];
  EXPECT_NE(log.lines[2].find("num_gpu_blocks=\"0\""), std::string::npos) << log.lines[2];
  EXPECT_EQ(learner.learned(0).kvSource, KvSource::kInvalid);
  EXPECT_EQ(learner.learned(0).kvCapacityTokens, 0);
}

TEST(CapacityLearner, TheSlotEstimateGrowsProbesOneBeyondAndStopsAtAQueue) {
  CapturedLog log;
  CapacityLearner learner({"http://a"}, {{}}, log.log());
  EXPECT_EQ(learner.initial(0).maxRunningRequests, 0);  // unknown before any scrape
  log.lines.clear();
  auto installed = learner.observe(0, {}, 3.0, 0.0);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->maxRunningRequests, 4);                 // 3 shown, one probe beyond
  EXPECT_FALSE(learner.observe(0, {}, 2.0, 0.0).has_value());  // fewer running: S stays
  EXPECT_FALSE(learner.observe(0, {}, 3.9, 0.0).has_value());
  EXPECT_FALSE(learner.observe(0, {}, 2.0, 1.0).has_value());  // a queue below S: no proof
  installed = learner.observe(0, {}, 3.0, 1.0);                // a queue at S running
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->maxRunningRequests, 3);
  EXPECT_EQ(learner.learned(0).slots, 3);
  EXPECT_EQ(learner.learned(0).slotSource, SlotSource::kEstimate);
  installed = learner.observe(0, {}, 6.0, 0.0);  // more shown: S grows, probing again
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->maxRunningRequests, 7);
  EXPECT_FALSE(learner.observe(0, {}, std::nan(""), 0.0).has_value());  // teaches nothing
  EXPECT_FALSE(learner.observe(0, {}, -1.0, std::nan("")).has_value());
  EXPECT_EQ(learner.learned(0).slots, 7);
  (void)learner.observe(0, {}, 1e300, 0.0);  // capped as the ledger caps its own estimate
  EXPECT_EQ(learner.learned(0).slots, DispatchLedger::kMaxObservedSlots + 1);
  // "absent" once, then one line per change of the estimate.
  ASSERT_EQ(log.lines.size(), 5u);
  EXPECT_NE(log.lines[0].find("at least 3 slots"), std::string::npos) << log.lines[0];
  EXPECT_NE(log.lines[1].find("no vllm:cache_config_info"), std::string::npos) << log.lines[1];
  EXPECT_NE(log.lines[2].find("3 slots (estimate: a scrape showed a queue"), std::string::npos)
      << log.lines[2];
  EXPECT_NE(log.lines[3].find("at least 6 slots"), std::string::npos) << log.lines[3];
}

std::unique_ptr<UtilizationDetector> capacityTestDetector() {
  return std::move(UtilizationDetector::create({.queueDepthThreshold = 5,
                                                .kvCacheUtilThreshold = 0.8,
                                                .metricsStalenessThreshold = 1s}))
      .value();
}

TEST(PoolCapacity, LearnedCapacityReachesTheLedgerAndTheRoom) {
  CapturedLog log;
  Pool pool({"http://a", "http://b"}, {{"a", 1}, {"b", 2}}, {}, {}, {{.endpoint = 8}, {}},
            log.log());
  const TimePoint t = TimePoint{} + 100s;
  for (std::size_t i = 0; i < 2; ++i) {
    pool.recordScrape(i, {.waiting = 0, .running = 2, .kvCacheUsage = 0.25}, t, pool.mark(i), 0);
    pool.recordCapacity(i, validInfo(64), {.waiting = 0, .running = 2});
  }
  const auto view = pool.endpoints(t);
  EXPECT_EQ(view[0].maxRunningRequests, 8);
  EXPECT_EQ(view[0].kvCapacityTokens, 1024);
  EXPECT_EQ(view[1].maxRunningRequests, 3);  // the estimate: 2 shown, one probe beyond
  EXPECT_EQ(pool.capacity(1).slots, 3);
  EXPECT_EQ(pool.capacity(1).slotSource, SlotSource::kEstimate);
  std::vector<EndpointRoom> room(2);
  ASSERT_TRUE(capacityTestDetector()->room(view, t, room));
  EXPECT_EQ(room[0].slots, 6.0);
  EXPECT_DOUBLE_EQ(room[0].kvTokens, (0.8 - 0.25) * 1024);

  // A server whose cache_config_info turns absurd: capacity unknown again, the pool not gated.
  pool.recordCapacity(
      0, cacheInfo("vllm:cache_config_info{num_gpu_blocks=\"1e15\",block_size=\"16\"} 1\n"),
      {.waiting = 0, .running = 2});
  const auto after = pool.endpoints(t);
  EXPECT_EQ(after[0].kvCapacityTokens, 0);
  ASSERT_TRUE(capacityTestDetector()->room(after, t, room));
  EXPECT_GT(room[0].kvTokens, 0.0);  // unknown and below the threshold: not counted
  EXPECT_EQ(room[0].slots, 6.0);
  const auto picked = pool.pick(*capacityTestDetector(), t, 100);
  ASSERT_TRUE(picked.has_value());
}

TEST(PoolCapacity, PickPrefersWhereTheFootprintFits) {
  Pool pool({"http://a", "http://b"}, {{"a", 1}, {"b", 2}}, {}, {},
            {{.endpoint = 8}, {.endpoint = 8}});
  const TimePoint t = TimePoint{} + 100s;
  // a: KV nearly at the threshold (room 0.05 x 1024 = 51 tokens), b: half empty, more running.
  pool.recordScrape(0, {.waiting = 0, .running = 1, .kvCacheUsage = 0.75}, t, pool.mark(0), 0);
  pool.recordScrape(1, {.waiting = 0, .running = 3, .kvCacheUsage = 0.3}, t, pool.mark(1), 0);
  pool.recordCapacity(0, validInfo(64), {.waiting = 0, .running = 1});
  pool.recordCapacity(1, validInfo(64), {.waiting = 0, .running = 3});
  const auto det = capacityTestDetector();
  const auto big = pool.pick(*det, t, 200);  // fits only on b
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->endpoint, 1u);
  EXPECT_EQ(pool.inFlight(1), 1);
}

}  // namespace
}  // namespace holdback::gateway

namespace holdback::gateway {
namespace {

TEST(CompletionFootprint, IsThePromptEstimatePlusMaxTokens) {
  const auto kv = [](std::string_view body) { return scanCompletionBody(body).kvTokens(); };
  // 4 words, 19 bytes: max(4, ceil(19 / 4)) = 5 prompt tokens.
  EXPECT_EQ(kv(R"({"prompt": "hello world foo bar", "max_tokens": 100})"), 105);
  EXPECT_EQ(kv(R"({"prompt": [1, 2, 3], "max_tokens": 10})"), 13);  // token ids
  EXPECT_EQ(kv(R"({"prompt": [[1, 2], "ab"], "max_tokens": 1})"), 4);
  EXPECT_EQ(kv(R"({"max_completion_tokens": 7, "prompt": "x"})"), 8);
  // Chat: every string of the messages ("user", "hi"), and the default 16 without a limit.
  EXPECT_EQ(kv(R"({"messages": [{"role": "user", "content": "hi"}]})"), 18);
  // Not a positive integer, or not at the top level: the default.
  EXPECT_EQ(kv(R"({"prompt": "x", "max_tokens": "5"})"), 17);
  EXPECT_EQ(kv(R"({"prompt": "x", "max_tokens": [5]})"), 17);
  EXPECT_EQ(kv(R"({"prompt": "x", "max_tokens": -3})"), 17);
  EXPECT_EQ(kv(R"({"prompt": "x", "extra": {"max_tokens": 99, "prompt": "long text here"}})"), 17);
  EXPECT_EQ(kv(R"({"prompt": "x", "max_tokens": 18446744073709551615})"),
            INT64_MAX);  // saturates, never wraps
  EXPECT_EQ(kv("not json"), CompletionBody::kDefaultMaxTokens);
}

}  // namespace
}  // namespace holdback::gateway

namespace holdback::gateway {
namespace {

TEST(CapacityLearner, TheProbeIsWiderThanTheReserveSoNoBandIsHeldBeforeTheEstimateGrows) {
  // A reserve of 2 free slots: the probe is 2 slots wider, so one request past the reserve can
  // still be placed on a server that has shown nothing running yet.
  CapacityLearner learner({"http://a"}, {{}}, {}, 2);
  const auto installed = learner.observe(0, {}, 0.0, 0.0);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->maxRunningRequests, 3);
  // Confirmed by a queue: the probe goes.
  EXPECT_EQ(learner.observe(0, {}, 4.0, 0.0)->maxRunningRequests, 7);
  EXPECT_EQ(learner.observe(0, {}, 4.0, 1.0)->maxRunningRequests, 4);
}

// --replica-mode reserve: a booking checks the slot count the ledger counts: the estimate with its
// probe past the reserve until a queue confirms it, a configured count as is (at least the
// reserve + 1), unknown (0) before the first scrape.
TEST(CapacityLearner, BookingSlotsAreTheLedgersCount) {
  CapacityLearner learner({"http://a", "http://b", "http://c"},
                          {{}, {.endpoint = 6}, {.endpoint = 1}}, {}, 2);
  EXPECT_EQ(learner.learned(0).bookingSlots, 0);
  EXPECT_EQ(learner.observe(0, {}, 0.0, 0.0)->maxRunningRequests, 3);
  EXPECT_EQ(learner.learned(0).bookingSlots, 3);  // nothing shown: the probe lets one through
  (void)learner.observe(0, {}, 4.0, 0.0);
  EXPECT_EQ(learner.learned(0).bookingSlots, 7);
  (void)learner.observe(0, {}, 4.0, 1.0);
  EXPECT_EQ(learner.learned(0).bookingSlots, 4);
  EXPECT_EQ(learner.learned(1).bookingSlots, 6);
  EXPECT_EQ(learner.learned(2).bookingSlots, 3);  // reserve 2 + one request of a lower band
}

}  // namespace
}  // namespace holdback::gateway

namespace holdback::gateway {
namespace {

TEST(CapacityLearner, AServerWithNoMoreSlotsThanTheReserveIsNotShutForLowerBands) {
  CapacityLearner learner({"http://a"}, {{.endpoint = 1}}, {}, 1);
  EXPECT_EQ(learner.initial(0).maxRunningRequests, 2);  // reserve 1 + one request of a lower band
  EXPECT_EQ(learner.learned(0).slots, 1);               // what /metrics shows
}

// SGLang and TensorRT-LLM report their capacity through their dialect's gauges
// (max_total_num_tokens, the maximum request count): learned when vllm:cache_config_info and the
// slot settings say nothing; bad readings (NaN, 0, negative, beyond the caps) teach nothing and
// are named once.
TEST(CapacityLearner, TheEnginesOwnCapacityGaugesAreLearnedWithoutCacheConfigInfo) {
  CapturedLog log;
  CapacityLearner learner({"http://s"}, {{}}, log.log());
  const CapacityLearner::Reported sglang{.kvCapacityTokens = 20480.7, .slots = 48.0};
  auto installed = learner.observe(0, {}, 2.0, 0.0, sglang);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->kvCapacityTokens, 20480);  // rounded down
  EXPECT_EQ(installed->maxRunningRequests, 48);   // the gauge, not the estimate's 2 + 1
  EXPECT_EQ(learner.learned(0).kvSource, KvSource::kMetric);
  EXPECT_EQ(learner.learned(0).slotSource, SlotSource::kMetric);
  EXPECT_EQ(toString(KvSource::kMetric), "metric");
  EXPECT_EQ(toString(SlotSource::kMetric), "metric");
  const std::size_t logged = log.lines.size();
  EXPECT_FALSE(learner.observe(0, {}, 5.0, 0.0, sglang).has_value());  // unchanged: nothing
  EXPECT_EQ(log.lines.size(), logged);

  // vllm:cache_config_info wins over the gauge when both are there.
  installed = learner.observe(0, validInfo(64), 5.0, 0.0, sglang);
  ASSERT_TRUE(installed.has_value());
  EXPECT_EQ(installed->kvCapacityTokens, 1024);
  EXPECT_EQ(learner.learned(0).kvSource, KvSource::kCacheConfigInfo);

  // The gauges go bad: KV unknown (named once), slots back to the estimate (5 shown + 1).
  for (const double bad : {std::nan(""), 0.0, -4.0, 1e30}) {
    installed = learner.observe(0, {}, 5.0, 0.0, {.kvCapacityTokens = bad, .slots = bad});
    EXPECT_EQ(learner.learned(0).kvCapacityTokens, 0) << bad;
    EXPECT_EQ(learner.learned(0).kvSource, KvSource::kInvalid) << bad;
    EXPECT_EQ(learner.learned(0).slotSource, SlotSource::kEstimate) << bad;
    EXPECT_EQ(learner.learned(0).slots, 6) << bad;
  }
  bool named = false;
  for (const std::string& l : log.lines) {
    named = named || l.find("KV-capacity gauge reads") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

TEST(CapacityLearner, ASlotSettingWinsOverTheEnginesSlotGauge) {
  CapacityLearner learner({"http://t"}, {{.pool = 8}}, {});
  (void)learner.observe(0, {}, 2.0, 0.0, {.slots = 64.0});
  EXPECT_EQ(learner.learned(0).slots, 8);
  EXPECT_EQ(learner.learned(0).slotSource, SlotSource::kPoolSetting);
}

}  // namespace
}  // namespace holdback::gateway
