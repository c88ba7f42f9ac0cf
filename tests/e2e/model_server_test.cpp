// holdback-model-server as a real process: OpenAI-shaped replies, SSE streaming, vLLM metrics,
// the slot limit with its FIFO queue, the KV-cache limit, a disconnecting client freeing its slot,
// and a clean exit on SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"
#include "e2e_support.hpp"
#include "http_client.hpp"

namespace holdback_e2e {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class ModelServerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeScratchDir("holdback-model-server-test"); }

  // Starts a server with the given extra flags; fails the test if it does not come up.
  ChildProcess& start(std::vector<std::string> flags) {
    std::vector<std::string> argv{HOLDBACK_MODEL_SERVER, "--port", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    server_ = std::make_unique<ChildProcess>("model-server", argv, dir_);
    EXPECT_TRUE(server_->startedOk()) << server_->error();
    return *server_;
  }

  HttpClient client(std::chrono::milliseconds readTimeout = 10s) {
    return HttpClient(server_->host(), server_->port(),
                      {.connectTimeout = 2s, .readTimeout = readTimeout});
  }

  std::string metrics() {
    auto c = client();
    auto r = c.get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  }

  // Streams a completion of `maxTokens` tokens; `onEvents(events so far)` runs after each
  // chunk, and returning false from it hangs up. True when the whole stream arrived.
  static bool streamCompletion(HttpClient& c, int maxTokens,
                               const std::function<bool(int)>& onEvents) {
    int events = 0;
    const auto r = c.send(
        "POST", "/v1/completions", {},
        R"({"prompt": "x", "stream": true, "max_tokens": )" + std::to_string(maxTokens) + "}",
        "application/json", [&](std::string_view data) {
          events += summarizeSse(data).events;
          return onEvents(events);
        });
    return static_cast<bool>(r);
  }

  void TearDown() override {
    if (server_ && server_->startedOk()) {
      // SIGTERM: a clean exit with status 0 (under the sanitizers, no leak and no UB either).
      const int status = server_->stop(std::chrono::milliseconds(8000));
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
    }
    if (HasFailure() && server_) std::cerr << server_->stderrTail() << "\n";
  }

  std::string dir_;
  std::unique_ptr<ChildProcess> server_;
};

TEST_F(ModelServerTest, ServesOpenAiShapedCompletionsStreamsAndMetrics) {
  ChildProcess& s = start({"--slots", "2", "--token-ms", "2", "--prefill-ms", "2", "--model",
                           "test-model", "--kv-capacity-tokens", "1000"});
  ASSERT_TRUE(s.startedOk());
  EXPECT_EQ(s.host(), "127.0.0.1");
  auto c = client();

  auto health = c.get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  // "one two three": 3 words, 13 characters -> max(3, ceil(13 / 4) = 4) = 4 prompt tokens.
  auto r = c.post("/v1/completions", R"({"prompt": "one two three", "max_tokens": 4})",
                  "application/json");
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->status, 200) << r->body;
  const auto body = nlohmann::json::parse(r->body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  EXPECT_EQ(body["usage"]["total_tokens"], 8);

  // The default max_tokens is 16.
  auto chat = c.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})",
                     "application/json");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const auto chat_body = nlohmann::json::parse(chat->body);
  EXPECT_EQ(chat_body["object"], "chat.completion");
  EXPECT_EQ(chat_body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat_body["usage"]["completion_tokens"], 16);

  auto stream = c.post("/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                           "stream": true, "stream_options": {"include_usage": true}})",
                       "application/json");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200);
  EXPECT_EQ(stream->header("Content-Type"), "text/event-stream");
  const SseSummary sse = summarizeSse(stream->body);
  EXPECT_EQ(sse.events, 4) << stream->body;  // 3 tokens and the usage chunk
  EXPECT_TRUE(sse.done) << stream->body;
  EXPECT_NE(stream->body.find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_NE(stream->body.find(R"("completion_tokens":3)"), std::string::npos);

  auto bad = c.post("/v1/completions", R"({"prompt": "x", "max_tokens": 0})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto too_big =
      c.post("/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", "application/json");
  ASSERT_TRUE(too_big);
  EXPECT_EQ(too_big->status, 400);
  EXPECT_NE(too_big->body.find("KV-cache capacity"), std::string::npos) << too_big->body;

  const std::string m = metrics();
  for (const char* name : {"vllm:num_requests_waiting", "vllm:num_requests_running",
                           "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + name + " gauge"), std::string::npos) << name;
    EXPECT_NE(m.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
    EXPECT_EQ(metricValue(m, name, "model_name=\"test-model\""), 0.0) << name << "\n" << m;
  }
  EXPECT_NE(m.find("# TYPE vllm:request_success_total counter"), std::string::npos);
  EXPECT_EQ(metricValue(m, "vllm:request_success_total"), 3.0) << m;
  EXPECT_EQ(metricValue(m, "vllm:generation_tokens_total"), 4.0 + 16.0 + 3.0) << m;
}

// Poll /metrics while `done` is false and record the largest gauges seen, checking every sample.
struct GaugeWatch {
  double maxRunning = 0, maxWaiting = 0, maxKv = 0;
  int samples = 0;
  bool kvMatchesRunning = true;
  bool namesAgree = true;
};

GaugeWatch watchGauges(ModelServerTest* test, const std::atomic<bool>& done,
                       const std::function<std::string()>& fetch, double kvPerRunning) {
  GaugeWatch w;
  while (!done) {
    const std::string m = fetch();
    auto running = metricValue(m, "vllm:num_requests_running");
    auto waiting = metricValue(m, "vllm:num_requests_waiting");
    auto kv = metricValue(m, "vllm:kv_cache_usage_perc");
    auto gpu = metricValue(m, "vllm:gpu_cache_usage_perc");
    if (running && waiting && kv && gpu) {
      ++w.samples;
      w.maxRunning = std::max(w.maxRunning, *running);
      w.maxWaiting = std::max(w.maxWaiting, *waiting);
      w.maxKv = std::max(w.maxKv, *kv);
      if (std::abs(*kv - *running * kvPerRunning) > 1e-9) w.kvMatchesRunning = false;
      if (*kv != *gpu) w.namesAgree = false;
    }
    std::this_thread::sleep_for(5ms);
  }
  (void)test;
  return w;
}

TEST_F(ModelServerTest, RunsAtMostSlotsSequencesAndQueuesTheRestInArrivalOrder) {
  // 2 slots, 10 tokens of 30 ms: each request runs >= 270 ms; 6 requests need 3 waves.
  ChildProcess& s = start(
      {"--slots", "2", "--token-ms", "30", "--prefill-ms", "0", "--kv-capacity-tokens", "1000"});
  ASSERT_TRUE(s.startedOk());
  constexpr int kRequests = 6;
  constexpr double kWaveMs = 270.0;
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<int> statuses(kRequests, -1);
  std::vector<double> finished_ms(kRequests, 0.0);
  const auto t0 = Clock::now();
  // Each running request holds prompt 1 + max_tokens 10 = 11 of 1000 KV tokens.
  GaugeWatch w;
  std::thread watcher([&] {
    w = watchGauges(
        this, done, [&] { return metrics(); }, 0.011);
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    // Request i is sent once the server holds the i before it, so the arrival order is known
    // whatever the scheduling noise.
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      const std::string m = metrics();
      if (metricValue(m, "vllm:num_requests_running").value_or(0) +
              metricValue(m, "vllm:num_requests_waiting").value_or(0) >=
          i) {
        break;
      }
      std::this_thread::sleep_for(2ms);
    }
    threads.emplace_back([&, i] {
      auto c = client();
      auto r =
          c.post("/v1/completions", R"({"prompt": "x", "max_tokens": 10})", "application/json");
      std::lock_guard lock(mu);
      statuses[static_cast<std::size_t>(i)] = r ? r->status : -1;
      finished_ms[static_cast<std::size_t>(i)] =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();

  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(statuses[static_cast<std::size_t>(i)], 200) << i;
  EXPECT_EQ(w.maxRunning, 2.0) << "never more than --slots running, and the slots were used";
  EXPECT_GE(w.maxWaiting, 3.0) << "the others waited in the queue";
  EXPECT_GT(w.samples, 5);
  EXPECT_TRUE(w.kvMatchesRunning) << "KV usage = running * 11 / 1000";
  EXPECT_TRUE(w.namesAgree) << "kv_cache_usage_perc and gpu_cache_usage_perc differ";
  // FIFO: request i runs in wave i / 2, so it ends a wave before request i + 2 (requests of the
  // same wave end about together, in either order); the third wave ends after 3 waves.
  for (int i = 0; i + 2 < kRequests; ++i) {
    EXPECT_LT(finished_ms[static_cast<std::size_t>(i)],
              finished_ms[static_cast<std::size_t>(i + 2)])
        << "request " << i + 2 << " overtook request " << i;
  }
  EXPECT_GE(finished_ms[5], 3 * kWaveMs);
}

TEST_F(ModelServerTest, KvCapacityLimitsTheBatchBeforeTheSlotsDo) {
  // 8 slots, but 30 KV tokens: requests of 1 + 10 tokens fit only two at a time.
  ChildProcess& s = start(
      {"--slots", "8", "--token-ms", "20", "--prefill-ms", "0", "--kv-capacity-tokens", "30"});
  ASSERT_TRUE(s.startedOk());
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto c = client();
      auto r =
          c.post("/v1/completions", R"({"prompt": "x", "max_tokens": 10})", "application/json");
      if (r && r->status == 200) ++ok;
    });
  }
  GaugeWatch w;
  std::thread watcher([&] {
    w = watchGauges(
        this, done, [&] { return metrics(); }, 11.0 / 30);
  });
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(w.maxRunning, 2.0);
  EXPECT_GE(w.maxWaiting, 1.0);
  EXPECT_LE(w.maxKv, 1.0);
  EXPECT_NEAR(w.maxKv, 22.0 / 30, 1e-9);
}

TEST_F(ModelServerTest, AClientThatDisconnectsMidStreamFreesItsSlot) {
  // One slot; the first request would hold it for 500 tokens * 20 ms = 10 s.
  ChildProcess& s = start({"--slots", "1", "--token-ms", "20", "--prefill-ms", "0"});
  ASSERT_TRUE(s.startedOk());
  auto c = client();
  int events = 0;
  const bool sent = streamCompletion(c, 500, [&](int n) {
    events = n;
    return n < 2;  // hang up after two tokens
  });
  EXPECT_FALSE(sent) << "the receiver aborted the stream";
  EXPECT_GE(events, 2);
  c.close();

  // The slot is free again: a short request completes at once, not after 10 s.
  const auto t0 = Clock::now();
  auto c2 = client(5s);
  auto r = c2.post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  const double waited = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(waited, 3000.0);
  const std::string m = metrics();
  EXPECT_EQ(metricValue(m, "vllm:num_requests_running"), 0.0) << m;
  EXPECT_EQ(metricValue(m, "vllm:kv_cache_usage_perc"), 0.0) << m;
}

TEST_F(ModelServerTest, SigtermMidStreamExitsCleanlyWithStatusZero) {
  ChildProcess& s = start({"--slots", "1", "--token-ms", "20", "--prefill-ms", "0"});
  ASSERT_TRUE(s.startedOk());
  std::atomic<int> events{0};
  std::thread streamer([&] {
    auto c = client();
    streamCompletion(c, 1000, [&](int n) {
      events = n;
      return true;
    });  // ends when the server goes away
  });
  // A queued request is released too.
  std::thread waiter([&] {
    auto c = client();
    c.post("/v1/completions", R"({"prompt": "x", "max_tokens": 5})", "application/json");
  });
  const auto deadline = Clock::now() + 5s;
  while (events < 2 && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_GE(events.load(), 2);
  s.signal(SIGTERM);
  const auto status = s.waitExit(8s);
  streamer.join();
  waiter.join();
  ASSERT_TRUE(status.has_value()) << "no exit within 8 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 0);
}

}  // namespace
}  // namespace holdback_e2e
