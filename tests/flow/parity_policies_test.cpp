// slo-deadline-ordering-policy and program-aware-fairness (upstream-reference.md §5): the
// reference's vectors, inside the controller, without allocation; and the fairness / ordering
// conformance suites over every built-in policy and a host's own.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_controller_fixture.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/core/text.hpp"
#include "holdback/flow/plugins/program_aware_fairness.hpp"
#include "holdback/flow/plugins/slo_deadline_ordering.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/testing/flow_policy_conformance.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FairnessPolicyConformanceTest;
using testing::FlowControllerTest;
using testing::OrderingPolicyConformanceTest;
using testing::request;

// ---------------------------------------------------------------------------------------------
// slo-deadline-ordering-policy

QueuedRequestView sloView(TimePoint received, std::optional<Duration> ttft) {
  QueuedRequestView v;
  v.receivedTime = received;
  v.enqueueTime = received;
  v.ttftObjective = ttft;
  return v;
}

TEST(SloDeadlineOrderingTest, ReferenceVectors) {
  const SloDeadlineOrderingPolicy slo;
  const TimePoint now = TimePoint{} + 1h;
  // now+100 ms vs now+50 ms: the 50 ms one first.
  EXPECT_TRUE(slo.less(sloView(now, 50ms), sloView(now, 100ms)));
  EXPECT_FALSE(slo.less(sloView(now, 100ms), sloView(now, 50ms)));
  // Received 20 ms later with a 50 ms SLO (deadline now+70 ms) beats now+100 ms.
  EXPECT_TRUE(slo.less(sloView(now + 20ms, 50ms), sloView(now, 100ms)));
  // Any SLO-bound request beats one without.
  EXPECT_TRUE(slo.less(sloView(now + 1h, 10h), sloView(now, std::nullopt)));
  EXPECT_FALSE(slo.less(sloView(now, std::nullopt), sloView(now + 1h, 10h)));
  // Same deadline (now+50 ms): received 1 s earlier with 1050 ms goes first.
  EXPECT_TRUE(slo.less(sloView(now - 1s, 1050ms), sloView(now, 50ms)));
  EXPECT_FALSE(slo.less(sloView(now, 50ms), sloView(now - 1s, 1050ms)));
  // The deadline saturates instead of overflowing.
  EXPECT_EQ(SloDeadlineOrderingPolicy::deadlineOf(sloView(TimePoint::max() - 1ns, 1h)),
            TimePoint::max());
}

TEST(SloDeadlineOrderingTest, HeaderParsingClampsAsUpstream) {
  using P = SloDeadlineOrderingPolicy;
  EXPECT_EQ(P::parseTtftHeader("200"), Duration(200ms));
  EXPECT_EQ(P::parseTtftHeader("  150 "), Duration(150ms));
  EXPECT_EQ(P::parseTtftHeader("+7"), Duration(7ms));
  EXPECT_EQ(P::parseTtftHeader("0"), Duration(0ms));
  for (const char* junk : {"", "   ", "x", "-1", "1.5", "12ms", "0x10", "+", "+-1", "1 2",
                           "9223372036854775807", "99999999999999999999"}) {
    EXPECT_EQ(P::parseTtftHeader(junk), std::nullopt) << junk;
  }
  // The overflow guard: INT64_MAX / 1e6 ms is the largest accepted value.
  const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 1'000'000;
  EXPECT_EQ(P::parseTtftHeader(std::to_string(limit)), Duration(std::chrono::milliseconds(limit)));
  EXPECT_EQ(P::parseTtftHeader(std::to_string(limit + 1)), std::nullopt);
  // The new header wins when both are present, even when its value is junk.
  EXPECT_EQ(P::ttftFromHeaders("200", "50"), Duration(200ms));
  EXPECT_EQ(P::ttftFromHeaders(std::nullopt, "150"), Duration(150ms));
  EXPECT_EQ(P::ttftFromHeaders("x", "150"), std::nullopt);
  EXPECT_EQ(P::ttftFromHeaders(std::nullopt, std::nullopt), std::nullopt);
}

TEST_F(FlowControllerTest, SloDeadlineOrdersAFlowByReceivedPlusObjective) {
  auto o = options();
  o.bands = {{.priority = 0, .ordering = sloDeadlineOrdering()}};
  auto fc = make(std::move(o));
  auto none = request("f", 0, 1);
  auto loose = request("f", 0, 2);
  loose.ttftObjective = 100ms;
  auto tight = request("f", 0, 3);
  tight.ttftObjective = 50ms;
  auto early = request("f", 0, 4);  // received 1 s before it was enqueued: deadline t0+50ms
  early.receivedTime = t0 - 1s;
  early.ttftObjective = 1050ms;
  fc->enqueue(std::move(none), t0);
  fc->enqueue(std::move(loose), t0);
  fc->enqueue(std::move(tight), t0);
  fc->enqueue(std::move(early), t0);
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0 + 1ms);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{4, 3, 2, 1}));
}

// ---------------------------------------------------------------------------------------------
// program-aware-fairness

std::shared_ptr<ProgramAwareFairnessPolicy> programAware(ProgramAwareFairnessOptions o = {}) {
  auto made = ProgramAwareFairnessPolicy::create(std::move(o));
  EXPECT_TRUE(made) << made.diagnostics().toString();
  return std::move(made).value();
}

TEST(ProgramAwareFairnessTest, AttainedServiceCountsOutputTwiceAndDecaysByHalfLife) {
  const auto p = programAware();
  const TimePoint t0 = TimePoint{} + 1h;
  p->recordServed("a", 100, 50, t0);  // 100 + 2 x 50
  EXPECT_DOUBLE_EQ(p->attainedService("a", t0), 200.0);
  EXPECT_NEAR(p->attainedService("a", t0 + 60s), 100.0, 1e-9);  // one half-life
  EXPECT_NEAR(p->attainedService("a", t0 + 120s), 50.0, 1e-9);
  p->recordServed("a", 50, 0, t0 + 60s);
  EXPECT_NEAR(p->attainedService("a", t0 + 60s), 150.0, 1e-9);
  EXPECT_EQ(p->attainedService("unknown", t0), 0.0);
  // Half-life 0: no decay.
  const auto flat = programAware({.halfLife = Duration::zero()});
  flat->recordServed("a", 10, 0, t0);
  EXPECT_EQ(flat->attainedService("a", t0 + 24h), 10.0);
}

// A program id is a client's fairness header: ill-formed UTF-8 in it must not make the state
// invalid JSON (the gateway's /debug page serves it).
TEST(ProgramAwareFairnessTest, StateIsValidJsonWhateverTheProgramIds) {
  const auto p = programAware();
  const TimePoint t0 = TimePoint{} + 1h;
  p->recordServed(std::string("\xff\xfe\x80") + "bad\"\\\x01", 10, 0, t0);
  const std::string state = p->dumpState(t0);
  EXPECT_TRUE(isValidUtf8(state)) << state;
  const auto j = nlohmann::json::parse(state, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << state;
  EXPECT_EQ(j["programs"][0]["id"],
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "bad\"\\\x01");
}

TEST(ProgramAwareFairnessTest, LongRunsRebaseWithoutOverflow) {
  const auto p = programAware({.halfLife = 1s, .evictionTtl = Duration::zero()});
  const TimePoint t0 = TimePoint{} + 1h;
  for (int i = 0; i <= 2000; ++i) p->recordServed("a", 1, 0, t0 + std::chrono::seconds(i));
  // Geometric series of ratio 1/2: converges to 2.
  const double s = p->attainedService("a", t0 + 2000s);
  EXPECT_TRUE(std::isfinite(s));
  EXPECT_NEAR(s, 2.0, 1e-9);
}

TEST(ProgramAwareFairnessTest, ForgetsProgramsAfterTheEvictionTtl) {
  const auto p = programAware({.evictionTtl = 10s, .evictionSweep = 5s});
  const TimePoint t0 = TimePoint{} + 1h;
  p->recordServed("old", 1, 0, t0);
  p->recordServed("new", 1, 0, t0 + 4s);  // no sweep yet (4 s < 5 s)
  EXPECT_EQ(p->programCount(), 2u);
  p->recordServed("new", 1, 0, t0 + 10s);  // sweep: "old" idle 10 s >= ttl
  EXPECT_EQ(p->programCount(), 1u);
  EXPECT_EQ(p->attainedService("old", t0 + 10s), 0.0);
}

TEST(ProgramAwareFairnessTest, InheritStateRescalesToTheNewHalfLife) {
  const TimePoint t0 = TimePoint{} + 1h;
  const auto before = programAware();  // half-life 60 s
  before->recordServed("heavy", 1000, 0, t0, 2s);
  before->recordServed("light", 10, 0, t0);
  const auto after = programAware({.halfLife = 120s});
  after->recordServed("light", 20, 0, t0 + 60s);  // a program both know: the sums
  after->inheritState(*before, t0 + 60s);
  // One old half-life has passed at the reload: 500 left; from then on the new half-life.
  EXPECT_NEAR(after->attainedService("heavy", t0 + 60s), 500.0, 1e-9);
  EXPECT_NEAR(after->attainedService("heavy", t0 + 180s), 250.0, 1e-9);
  EXPECT_NEAR(after->attainedService("light", t0 + 60s), 25.0, 1e-9);
  EXPECT_EQ(after->programCount(), 2u);
  EXPECT_NE(after->dumpState(t0 + 60s).find("\"requests\": 1, \"meanQueueWaitSeconds\": 2"),
            std::string::npos)
      << after->dumpState(t0 + 60s);
  // The previous instance is untouched; another type or itself hands over nothing.
  EXPECT_NEAR(before->attainedService("heavy", t0 + 60s), 500.0, 1e-9);
  after->inheritState(*after, t0 + 60s);
  after->inheritState(GlobalStrictFairnessPolicy(), t0 + 60s);
  EXPECT_NEAR(after->attainedService("heavy", t0 + 60s), 500.0, 1e-9);
  // Into an instance without decay: the decayed value, kept as is.
  const auto flat = programAware({.halfLife = Duration::zero()});
  flat->inheritState(*before, t0 + 120s);
  EXPECT_NEAR(flat->attainedService("heavy", t0 + 24h), 250.0, 1e-9);
}

TEST(ProgramAwareFairnessTest, RejectsInvalidParameters) {
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.strategy = "vtc"}));
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.weightService = -0.1}));
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.weightHeadWait = std::nan("")}));
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.halfLife = -1s}));
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.evictionTtl = -1s}));
  EXPECT_FALSE(ProgramAwareFairnessPolicy::create({.evictionSweep = Duration::zero()}));
  EXPECT_TRUE(ProgramAwareFairnessPolicy::create(
      {.halfLife = Duration::zero(), .evictionTtl = Duration::zero()}));
}

TEST_F(FlowControllerTest, ProgramAwarePicksLeastAttainedService) {
  const auto p = programAware();
  auto o = options();
  o.bands = {{.priority = 0, .fairness = p}};
  auto fc = make(std::move(o));
  p->recordServed("heavy", 10000, 1000, t0);
  p->recordServed("light", 100, 10, t0);
  // Same head wait for all: service decides (never-served "fresh" first, then light).
  for (const char* flow : {"heavy", "light", "fresh"}) fc->enqueue(request(flow, 0), t0);
  for (int i = 0; i < 3; ++i) fc->dispatchCycle(t0 + 1ms);
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"fresh", "light", "heavy"}));
}

TEST_F(FlowControllerTest, ProgramAwareHeavyProgramStaysDeprioritisedAfterAReload) {
  const auto before = programAware();
  auto o = options();
  o.defaultBand.fairness = before;
  o.defaultRequestTtl = 0s;
  auto fc = make(std::move(o));
  before->recordServed("heavy", 100000, 10000, t0);
  before->recordServed("light", 10, 0, t0);
  now = t0 + 30s;
  // The reload builds a new instance (as a config reload does) with another half-life.
  const auto after = programAware({.halfLife = 120s});
  auto reloaded = options();
  reloaded.defaultBand.fairness = after;
  reloaded.defaultRequestTtl = 0s;
  ASSERT_FALSE(fc->reconfigure(std::move(reloaded)).hasErrors());
  EXPECT_NEAR(after->attainedService("heavy", now), 120000.0 / std::sqrt(2.0), 1e-6);
  // heavy has waited longer, but its service keeps it behind light.
  fc->enqueue(request("heavy", 0, 1), now);
  fc->enqueue(request("light", 0, 2), now + 10ms);
  fc->dispatchCycle(now + 20ms);
  fc->dispatchCycle(now + 20ms);
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"light", "heavy"}));
  // Reports now go to the new instance; the old one no longer picks.
  EXPECT_EQ(before->pickCounts().picks, 0u);
  EXPECT_EQ(after->pickCounts().picks, 2u);
}

TEST_F(FlowControllerTest, ProgramAwareWeighsHeadWait) {
  // Two programs: service term 0.8 x (1 - norm), wait term 0.2 x norm.
  const auto p = programAware();
  auto o = options();
  o.bands = {{.priority = 0, .fairness = p}};
  auto fc = make(std::move(o));
  p->recordServed("a", 1000, 0, t0);
  p->recordServed("b", 0, 0, t0);
  // "a" waited longest (score 0.2), "b" least served (0.8): b wins.
  fc->enqueue(request("a", 0, 1), t0);
  fc->enqueue(request("b", 0, 2), t0 + 10ms);
  fc->dispatchCycle(t0 + 20ms);
  // With the weights swapped the longest wait wins.
  const auto waiting = programAware({.weightService = 0.2, .weightHeadWait = 0.8});
  auto o2 = options();
  o2.bands = {{.priority = 0, .fairness = waiting}};
  auto fc2 = make(std::move(o2));
  waiting->recordServed("a", 1000, 0, t0);
  fc2->enqueue(request("a", 0, 3), t0);
  fc2->enqueue(request("b", 0, 4), t0 + 10ms);
  fc2->dispatchCycle(t0 + 20ms);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{2, 3}));
}

TEST_F(FlowControllerTest, ProgramAwareEqualScoresGoToTheSmallerFlowId) {
  const auto p = programAware();
  auto o = options();
  o.bands = {{.priority = 0, .fairness = p}};
  auto fc = make(std::move(o));
  for (const char* flow : {"c", "a", "b"}) fc->enqueue(request(flow, 0), t0);
  fc->dispatchCycle(t0);
  EXPECT_EQ(rec.dispatchedFlows(), (std::vector<std::string>{"a"}));
}

// The indexed pick against the full scan it replaces: upstream's score over every non-empty flow
// (norm over the candidates, 0.5 when all equal; strict >, equal scores -> the smaller flow id),
// under random enqueues, cancels, reports and dispatches with many equal services and times. Every
// pick that did not stop at kMaxPickVisits must equal the scan; with at most kMaxPickVisits flows
// none stops there. (halfLife 0: the reported sums are exact, so the scan reads the same services.)
TEST_F(FlowControllerTest, ProgramAwarePickEqualsTheFullScan) {
  struct Case {
    int flows;
    double ws;
    double ww;
  };
  const Case cases[] = {{5, 0.8, 0.2},  {16, 0.8, 0.2}, {16, 0.2, 0.8},
                        {16, 0.5, 0.5}, {12, 1.0, 0.0}, {12, 0.0, 1.0},
                        {12, 0.0, 0.0}, {64, 0.8, 0.2}, {300, 0.8, 0.2}};
  for (const Case& c : cases) {
    for (unsigned seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(::testing::Message()
                   << c.flows << " flows, weights " << c.ws << "/" << c.ww << ", seed " << seed);
      const auto p = programAware({.weightService = c.ws,
                                   .weightHeadWait = c.ww,
                                   .halfLife = Duration::zero(),
                                   .evictionTtl = Duration::zero()});
      std::vector<std::string> dispatched;
      auto o = options();
      o.defaultRequestTtl = Duration::zero();
      o.bands = {{.priority = 0, .fairness = p}};
      o.onOutcome = [&](Completion&& done) {
        if (done.outcome.dispatched()) dispatched.push_back(done.flowId);
      };
      auto fc = make(std::move(o));
      ASSERT_NE(fc, nullptr);
      std::mt19937 rng(seed);
      const auto below = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
      const auto flowName = [](int i) { return "program-" + std::to_string(i); };
      // The scan's view: each flow's queued requests (payload, enqueue time) in FCFS order.
      std::map<std::string, std::vector<std::pair<int, TimePoint>>> queued;
      std::vector<std::pair<int, Ticket>> tickets;
      TimePoint at = t0;
      int next = 0;
      int compared = 0;
      const auto scan = [&]() -> std::string {
        double min_s = 0, max_s = 0;
        TimePoint min_e = TimePoint::max(), max_e = TimePoint::min();
        bool first = true;
        for (const auto& [id, items] : queued) {
          if (items.empty()) continue;
          const double s = p->attainedService(id, at);
          min_s = first ? s : std::min(min_s, s);
          max_s = first ? s : std::max(max_s, s);
          first = false;
          min_e = std::min(min_e, items.front().second);
          max_e = std::max(max_e, items.front().second);
        }
        if (first) return {};  // nothing queued (and min_e / max_e still at their sentinels)
        const double s_range = max_s - min_s;
        const double w_range = std::chrono::duration<double>(max_e - min_e).count();
        std::string best;
        double best_score = 0;
        for (const auto& [id, items] : queued) {
          if (items.empty()) continue;
          const double ns = s_range > 0 ? (p->attainedService(id, at) - min_s) / s_range : 0.5;
          const double nw =
              w_range > 0
                  ? std::chrono::duration<double>(max_e - items.front().second).count() / w_range
                  : 0.5;
          const double score = c.ws * (1.0 - ns) + c.ww * nw;
          if (best.empty() || score > best_score) {
            best = id;
            best_score = score;
          }
        }
        return best;
      };
      const auto dispatchOne = [&] {
        const std::string expected = scan();
        const auto before = p->pickCounts().stoppedAtLimit;
        dispatched.clear();
        fc->dispatchCycle(at);
        ASSERT_EQ(dispatched.size(), expected.empty() ? 0u : 1u);
        if (expected.empty()) return;
        auto& items = queued[dispatched[0]];
        ASSERT_FALSE(items.empty()) << dispatched[0];
        items.erase(items.begin());
        if (p->pickCounts().stoppedAtLimit != before) return;
        ++compared;
        ASSERT_EQ(dispatched[0], expected);
      };
      for (int step = 0; step < 1500; ++step) {
        if (below(3) == 0) at += std::chrono::milliseconds(below(3));  // many equal times
        const int action = below(10);
        if (action < 5) {
          const std::string id = flowName(below(c.flows));
          queued[id].push_back({next, at});
          tickets.emplace_back(next, fc->enqueue(request(id, 0, next), at));
          ++next;
        } else if (action < 7) {
          static constexpr std::uint64_t kTokens[] = {0, 10, 100, 1000};
          p->recordServed(flowName(below(c.flows)), kTokens[below(4)], kTokens[below(4)], at);
        } else if (action < 8) {
          if (tickets.empty()) continue;
          auto& [payload, ticket] =
              tickets[static_cast<std::size_t>(below(static_cast<int>(tickets.size())))];
          if (ticket.cancel()) {
            for (auto& [id, items] : queued) {
              std::erase_if(items, [&](const auto& item) { return item.first == payload; });
            }
          }
        } else {
          dispatchOne();
          if (HasFatalFailure()) return;
        }
      }
      while (fc->stats().queuedRequests > 0) {
        dispatchOne();
        if (HasFatalFailure()) return;
      }
      EXPECT_GT(compared, 0);
      if (c.flows <= ProgramAwareFairnessPolicy::kMaxPickVisits) {
        EXPECT_EQ(p->pickCounts().stoppedAtLimit, 0u);
      }
    }
  }
}

// A program with queued requests enters the table (service 0) and is not forgotten while
// queued; once forgotten and queued again, its reports still reach the band's index.
TEST_F(FlowControllerTest, ProgramAwareKeepsQueuedProgramsAndFollowsReports) {
  const auto p = programAware({.evictionTtl = 10s, .evictionSweep = 5s});
  auto o = options();
  o.defaultRequestTtl = Duration::zero();
  o.bands = {{.priority = 0, .fairness = p}};
  auto fc = make(std::move(o));
  p->recordServed("other", 1, 0, t0);
  fc->enqueue(request("queued", 0, 1), t0);
  EXPECT_EQ(p->programCount(), 2u);
  p->recordServed("other", 1, 0, t0 + 20s);  // sweep: "queued" is idle 20 s but has a request
  EXPECT_EQ(p->programCount(), 2u);
  fc->dispatchCycle(t0 + 20s);
  p->recordServed("other", 1, 0, t0 + 40s);  // sweep: now it goes
  EXPECT_EQ(p->programCount(), 1u);
  EXPECT_EQ(p->attainedService("queued", t0 + 40s), 0.0);
  // Queued again (a new table entry), then reported heavier than "other": "other" goes first.
  fc->enqueue(request("queued", 0, 2), t0 + 40s);
  fc->enqueue(request("other", 0, 3), t0 + 40s);
  p->recordServed("queued", 1000, 0, t0 + 40s);
  fc->dispatchCycle(t0 + 40s);
  fc->dispatchCycle(t0 + 40s);
  EXPECT_EQ(rec.dispatchedPayloads(), (std::vector<int>{1, 3, 2}));
}

TEST(ProgramAwareFairnessTest, DumpStateIsAJsonSnapshot) {
  const auto p = programAware();
  const TimePoint t0 = TimePoint{} + 1h;
  p->recordServed("tenant \"a\"", 10, 5, t0, 2s);
  p->recordServed("b", 1, 0, t0, 2s);
  EXPECT_EQ(p->jainFairnessIndex(), 1.0);  // equal mean waits
  p->recordServed("b", 1, 0, t0, 0s);      // b's mean wait 1 s, a's 2 s: (3)^2 / (2 x 5) = 0.9
  EXPECT_NEAR(p->jainFairnessIndex(), 0.9, 1e-12);
  const auto state = config::parseDocument(p->dumpState(t0));
  ASSERT_TRUE(state) << p->dumpState(t0);
  const config::Json& j = state->json;
  EXPECT_EQ(j["type"], "program-aware-fairness");
  EXPECT_EQ(j["parameters"]["lasWeightService"], 0.8);
  EXPECT_EQ(j["parameters"]["lasHalfLifeSeconds"], 60);
  ASSERT_EQ(j["programs"].size(), 2u);
  EXPECT_EQ(j["programs"][1]["id"], "tenant \"a\"");
  EXPECT_EQ(j["programs"][1]["attainedService"], 20);
  EXPECT_EQ(j["programs"][0]["requests"], 2);
  EXPECT_NEAR(j["jainFairnessIndex"].get<double>(), 0.9, 1e-9);
}

// Hot-path rule: in steady state a cycle with the new policies does not allocate.
TEST_F(FlowControllerTest, NewPoliciesDoNotAllocateInACycle) {
  const auto p = programAware();
  std::vector<Completion> done;
  done.reserve(4096);
  auto o = options();
  o.bands = {{.priority = 10, .fairness = p, .ordering = sloDeadlineOrdering()},
             {.priority = 0, .fairness = p}};
  o.onOutcome = [&](Completion&& c) { done.push_back(std::move(c)); };
  auto fc = make(std::move(o));
  // Warm-up of band 0 (its scratch buffer reaches the flow count) before band 10 has work.
  for (int i = 0; i < 97; ++i) {
    fc->enqueue(request("program-with-a-long-identifier-" + std::to_string(i), 0, -1), t0);
  }
  fc->dispatchCycle(t0);
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "program-with-a-long-identifier-" + std::to_string(i % 97);
    auto r = request(id, i % 2 ? 10 : 0, i);
    r.ttftObjective = std::chrono::milliseconds(i % 13);
    fc->enqueue(std::move(r), t0 + std::chrono::microseconds(i));
    p->recordServed(id, 10, 10, t0);
  }
  fc->dispatchCycle(t0);  // warm-up: the band states' scratch buffers reach the flow count
  fc->dispatchCycle(t0);
  std::size_t allocations = 0;
  {
    holdback::testing::AllocationCounter counter;
    for (int i = 0; i < 1000; ++i) fc->dispatchCycle(t0 + 1s);
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0u);
  EXPECT_EQ(done.size(), 1003u);
}

// ---------------------------------------------------------------------------------------------
// The conformance suites: every built-in policy and a host's own.

struct LifoOrdering final : OrderingPolicy {
  std::string_view type() const noexcept override { return "host-lifo"; }
  bool less(const QueuedRequestView& a, const QueuedRequestView& b) const noexcept override {
    return a.enqueueTime > b.enqueueTime;
  }
};

// A host's fairness policy: the non-empty flow with the largest id.
struct LastFlowFairness final : FairnessPolicy {
  std::string_view type() const noexcept override { return "host-last-flow"; }
  const FlowQueueView* pick(const BandView& band, FairnessState*) const noexcept override {
    const FlowQueueView* last = nullptr;
    for (const FlowQueueView* f = band.firstActiveFlow(); f != nullptr;
         f = band.nextActiveFlowAfter(f->flowId())) {
      last = f;
    }
    return last;
  }
};

const holdback::testing::OrderingFactory kOrderings[] = {
    {"fcfs", [] { return std::make_unique<FcfsOrderingPolicy>(); }},
    {"edf", [] { return std::make_unique<EdfOrderingPolicy>(); }},
    {"slo_deadline", [] { return std::make_unique<SloDeadlineOrderingPolicy>(); }},
    {"host_lifo", [] { return std::make_unique<LifoOrdering>(); }},
};
INSTANTIATE_TEST_SUITE_P(All, OrderingPolicyConformanceTest, ::testing::ValuesIn(kOrderings),
                         holdback::testing::FactoryName{});

const holdback::testing::FairnessFactory kFairness[] = {
    {"global_strict", [] { return std::make_unique<GlobalStrictFairnessPolicy>(); }},
    {"round_robin", [] { return std::make_unique<RoundRobinFairnessPolicy>(); }},
    {"program_aware",
     [] {
       auto p = std::move(ProgramAwareFairnessPolicy::create()).value();
       const TimePoint t0 = TimePoint{} + 1h;
       for (int i = 0; i < 64; i += 3) p->recordServed("flow-" + std::to_string(i), i, i, t0);
       return std::unique_ptr<FairnessPolicy>(std::move(p));
     }},
    {"host_last_flow", [] { return std::make_unique<LastFlowFairness>(); }},
};
INSTANTIATE_TEST_SUITE_P(All, FairnessPolicyConformanceTest, ::testing::ValuesIn(kFairness),
                         holdback::testing::FactoryName{});

}  // namespace
}  // namespace holdback

namespace holdback {
namespace {

// ---------------------------------------------------------------------------------------------
// Dispatch-cycle and enqueue duration histograms (FlowControllerOptions::durationMetrics).

TEST_F(FlowControllerTest, DurationMetricsUseTheInjectedClockOnlyWhenEnabled) {
  for (const bool enabled : {false, true}) {
    int clock_calls = 0;
    auto o = options();
    o.durationMetrics = enabled;
    // Every read advances 3 us: each measured call lasts exactly 3 us.
    o.clock = [&] { return t0 + std::chrono::microseconds(3 * ++clock_calls); };
    auto fc = make(std::move(o));
    for (int i = 0; i < 5; ++i) fc->enqueue(request("f", 0, i), t0);
    for (int i = 0; i < 7; ++i) fc->dispatchCycle(t0);
    const FlowControllerStats s = fc->stats();
    const std::string text = renderPrometheus(s);
    if (!enabled) {
      EXPECT_EQ(clock_calls, 0);  // no clock read on the hot paths
      EXPECT_FALSE(s.dispatchCycleDuration);
      EXPECT_FALSE(s.enqueueDuration);
      EXPECT_EQ(text.find("dispatch_cycle_duration"), std::string::npos);
      continue;
    }
    EXPECT_EQ(clock_calls, 2 * (5 + 7));
    ASSERT_TRUE(s.dispatchCycleDuration);
    ASSERT_TRUE(s.enqueueDuration);
    EXPECT_EQ(s.dispatchCycleDuration->count, 7u);
    EXPECT_EQ(s.enqueueDuration->count, 5u);
    EXPECT_EQ(s.dispatchCycleDuration->buckets[2], 7u);  // (2.5 us, 5 us]
    EXPECT_NEAR(s.enqueueDuration->sumSeconds, 5 * 3e-6, 1e-12);
    EXPECT_NE(text.find("holdback_flow_control_dispatch_cycle_duration_seconds_bucket{le=\"5e-06\","
                        "inference_pool=\"default\"} 7"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("holdback_flow_control_request_enqueue_duration_seconds_count{"
                        "inference_pool=\"default\"} 5"),
              std::string::npos)
        << text;
  }
}

}  // namespace
}  // namespace holdback

#include "holdback/metrics/stale_endpoints.hpp"

namespace holdback {
namespace {

TEST(StaleEndpointMonitorTest, ReferenceVector) {
  auto detector =
      std::move(UtilizationDetector::create({.metricsStalenessThreshold = std::chrono::hours(1)}))
          .value();
  std::vector<std::string> lines;
  StaleEndpointMonitor monitor([&](std::string_view line) { lines.emplace_back(line); });
  const TimePoint now = TimePoint{} + 10h;
  std::vector<Endpoint> pool(3);
  pool[0].updateTime = now;       // fresh
  pool[1].updateTime = now - 2h;  // stale
  // pool[2]: no metrics yet (stale)
  EXPECT_EQ(monitor.update(*detector, pool, now), 2u);
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_EQ(monitor.update(*detector, pool, now + 29s), 2u);
  EXPECT_EQ(lines.size(), 1u);  // at most once per 30 s
  EXPECT_EQ(monitor.update(*detector, {}, now + 30s), 0u);
  EXPECT_EQ(monitor.count(), 0u);
  EXPECT_EQ(monitor.update(*detector, pool, now + 31s), 2u);
  EXPECT_EQ(lines.size(), 2u);  // 31 s after the first line
  EXPECT_EQ(monitor.update(*detector, std::span<const Endpoint>(pool).first(1), now + 32s), 0u);
  EXPECT_NE(lines[0].find("2 of 3 endpoints"), std::string::npos) << lines[0];
  EXPECT_EQ(renderStaleEndpoints(2, "util", "p"),
            "# HELP holdback_flow_control_stale_endpoints Endpoints whose metrics are missing, "
            "stale or invalid, per saturation detector.\n"
            "# TYPE holdback_flow_control_stale_endpoints gauge\n"
            "holdback_flow_control_stale_endpoints{detector=\"util\",inference_pool=\"p\"} 2\n");
}

TEST_F(FlowControllerTest, OutcomeCounterIsLabelledAsUpstream) {
  auto fc = make(options());
  auto t = fc->enqueue(request("f", 0), t0);
  t.cancel();
  const std::string text = renderPrometheus(fc->stats());
  EXPECT_NE(text.find("holdback_flow_control_requests_total{outcome=\"EvictedContextCancelled\","
                      "priority=\"0\",inference_pool=\"default\"} 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(prometheusOutcomeLabel(QueueOutcome::kEvictedTtl), "EvictedTTL");
}

}  // namespace
}  // namespace holdback

#include "holdback/metrics/drop_summary.hpp"

namespace holdback {
namespace {

TEST_F(FlowControllerTest, DropSummaryIsBoundedAndRateLimited) {
  auto o = options();
  o.bands = {{.priority = 0}, {.priority = -10, .maxRequests = 1}};
  auto fc = make(std::move(o));
  DropSummary summary(std::chrono::seconds(1), 1);
  EXPECT_EQ(summary.update(fc->stats(), t0), std::nullopt);        // baseline
  fc->enqueue(request("a", -10), t0);                              // queued
  for (int i = 0; i < 3; ++i) fc->enqueue(request("b", -10), t0);  // 3 x RejectedCapacity
  auto t = fc->enqueue(request("c", 0), t0);
  t.cancel();                                                        // 1 x EvictedCancelled
  fc->dispatchCycle(t0);                                             // dispatches "a": not a drop
  EXPECT_EQ(summary.update(fc->stats(), t0 + 500ms), std::nullopt);  // within the interval
  EXPECT_EQ(summary.update(fc->stats(), t0 + 1s),
            "dropped 4 requests in 1s: RejectedCapacity priority=-10: 3, +1 more");
  EXPECT_EQ(summary.update(fc->stats(), t0 + 3s), std::nullopt);  // nothing new
}

}  // namespace
}  // namespace holdback
