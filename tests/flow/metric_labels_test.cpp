// Metric labels as upstream spells them, and their bounds: flow_control_requests_total by the
// requested priority (upstream #1636) with a cap on the distinct requested priorities, and the
// per-flow queue gauges (fairness_id) with a cap and an "other" bucket (upstream #2119).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "flow_controller_fixture.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "holdback/metrics/prometheus.hpp"
#include "holdback/metrics/prometheus_parser.hpp"

namespace holdback {
namespace {

using namespace std::chrono_literals;
using testing::FlowControllerTest;
using testing::request;

class FlowMetricLabelsTest : public FlowControllerTest {};

// Samples of `name` by their labels (inference_pool left out), from the exposition text.
std::map<std::vector<std::pair<std::string, std::string>>, double> samplesOf(
    const std::string& text, const std::string& name) {
  std::map<std::vector<std::pair<std::string, std::string>>, double> out;
  const ParsedPrometheusText parsed = parsePrometheusText(text);
  EXPECT_EQ(parsed.skippedLines, 0u);
  for (const PrometheusSample& s : parsed.samples) {
    if (s.name != name) continue;
    std::vector<std::pair<std::string, std::string>> labels;
    for (const auto& l : s.labels) {
      if (l.first != "inference_pool") labels.push_back(l);
    }
    EXPECT_TRUE(out.emplace(labels, s.value).second) << "duplicate series of " << name;
  }
  return out;
}

double requestsTotal(const std::string& text, const std::string& outcome,
                     const std::string& priority) {
  const auto all = samplesOf(text, "holdback_flow_control_requests_total");
  const auto it = all.find({{"outcome", outcome}, {"priority", priority}});
  return it == all.end() ? -1.0 : it->second;
}

// ---------------------------------------------------------------------------------------------
// requests_total by requested priority

TEST_F(FlowMetricLabelsTest, RequestsTotalIsLabelledWithTheRequestedPriority) {
  auto o = options();
  o.provisionOnFirstUse = false;  // priorities without a band go to band 0 (§3.5)
  o.bands = {{.priority = 10}, {.priority = 0, .maxRequests = 3}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 7), t0);   // band 0, requested 7
  fc->enqueue(request("a", 7), t0);   // band 0, requested 7
  fc->enqueue(request("a", -3), t0);  // band 0, requested -3
  fc->enqueue(request("a", 7), t0);   // band 0 is full: rejected, requested 7
  fc->enqueue(request("a", 0), t0);   // rejected too, requested 0
  fc->enqueue(request("a", 10), t0);  // band 10
  for (int i = 0; i < 4; ++i) fc->dispatchCycle(t0);

  const FlowControllerStats stats = fc->stats();
  const auto band0 = std::find_if(stats.bands.begin(), stats.bands.end(),
                                  [](const BandStats& b) { return b.priority == 0; });
  ASSERT_NE(band0, stats.bands.end());
  const auto dispatched = static_cast<std::size_t>(QueueOutcome::kDispatched);
  const auto capacity = static_cast<std::size_t>(QueueOutcome::kRejectedCapacity);
  // The band's own counters are unchanged: everything placed in it.
  EXPECT_EQ(band0->outcomes[dispatched], 3u);
  EXPECT_EQ(band0->outcomes[capacity], 2u);
  ASSERT_EQ(band0->requestedOutcomes.size(), 2u);
  EXPECT_EQ(band0->requestedOutcomes[0].requestedPriority, -3);
  EXPECT_EQ(band0->requestedOutcomes[0].outcomes[dispatched], 1u);
  EXPECT_EQ(band0->requestedOutcomes[1].requestedPriority, 7);
  EXPECT_EQ(band0->requestedOutcomes[1].outcomes[dispatched], 2u);
  EXPECT_EQ(band0->requestedOutcomes[1].outcomes[capacity], 1u);
  EXPECT_EQ(stats.untrackedRequestedOutcomes, 0u);

  const std::string text = renderPrometheus(stats);
  EXPECT_EQ(requestsTotal(text, "Dispatched", "7"), 2.0) << text;
  EXPECT_EQ(requestsTotal(text, "RejectedCapacity", "7"), 1.0);
  EXPECT_EQ(requestsTotal(text, "Dispatched", "-3"), 1.0);
  EXPECT_EQ(requestsTotal(text, "Dispatched", "0"), 0.0);  // band 0's own: none dispatched
  EXPECT_EQ(requestsTotal(text, "RejectedCapacity", "0"), 1.0);
  EXPECT_EQ(requestsTotal(text, "Dispatched", "10"), 1.0);
  // The sum over every series is the number of finalized requests.
  double sum = 0.0;
  for (const auto& [labels, v] : samplesOf(text, "holdback_flow_control_requests_total")) sum += v;
  EXPECT_EQ(sum, 6.0);
}

TEST_F(FlowMetricLabelsTest, AbsurdRequestedPrioritiesAreCappedAndFoldedIntoTheBand) {
  auto o = options();
  o.provisionOnFirstUse = false;
  o.defaultBand.maxRequests = 100000;
  auto fc = make(std::move(o));
  // INT_MIN, INT_MAX and 5000 distinct priorities, all queued in band 0 and cancelled.
  std::vector<Priority> priorities{std::numeric_limits<Priority>::min(),
                                   std::numeric_limits<Priority>::max()};
  for (int i = 1; i <= 5000; ++i) priorities.push_back(i * 1000);
  std::uint64_t finalized = 0;
  for (const Priority p : priorities) {
    Ticket t = fc->enqueue(request("f", p), t0);
    ASSERT_TRUE(t.cancel());
    ++finalized;
  }
  const FlowControllerStats stats = fc->stats();
  ASSERT_EQ(stats.bands.size(), 1u);
  const BandStats& b = stats.bands[0];
  const auto cancelled = static_cast<std::size_t>(QueueOutcome::kEvictedCancelled);
  EXPECT_EQ(b.outcomes[cancelled], finalized);
  ASSERT_EQ(b.requestedOutcomes.size(), kRequestedPriorityLabelLimit);
  EXPECT_EQ(b.requestedOutcomes.front().requestedPriority, std::numeric_limits<Priority>::min());
  EXPECT_EQ(stats.untrackedRequestedOutcomes, finalized - kRequestedPriorityLabelLimit);

  const std::string text = renderPrometheus(stats);
  const auto series = samplesOf(text, "holdback_flow_control_requests_total");
  std::set<std::string> priorityLabels;
  double sum = 0.0;
  for (const auto& [labels, v] : series) {
    priorityLabels.insert(labels[1].second);
    sum += v;
  }
  // The tracked requested priorities plus band 0 (holding the untracked ones).
  EXPECT_EQ(priorityLabels.size(), kRequestedPriorityLabelLimit + 1);
  EXPECT_EQ(sum, double(finalized));
  EXPECT_EQ(requestsTotal(text, "EvictedContextCancelled", "0"),
            double(finalized - kRequestedPriorityLabelLimit));
  EXPECT_EQ(requestsTotal(text, "EvictedContextCancelled", "-2147483648"), 1.0);
  EXPECT_EQ(requestsTotal(text, "EvictedContextCancelled", "2147483647"), 1.0);
}

TEST_F(FlowMetricLabelsTest, CountingOffBandRequestedPrioritiesDoesNotAllocate) {
  auto o = options();
  o.provisionOnFirstUse = false;
  o.onOutcome = [](Completion&&) {};  // the recorder's vector would allocate
  auto fc = make(std::move(o));
  std::vector<FlowRequest> requests;
  requests.reserve(2000);
  // 100 distinct requested priorities: the table fills up (64), then the rest are untracked.
  for (int i = 0; i < 2000; ++i) requests.push_back(request("f", 1 + i % 100, i));
  for (int i = 0; i < 100; ++i) (void)fc->enqueue(std::move(requests[i]), t0);
  for (int i = 0; i < 100; ++i) fc->dispatchCycle(t0);  // records into the pool
  {
    holdback::testing::AllocationCounter counter;
    for (int i = 100; i < 2000; ++i) {
      (void)fc->enqueue(std::move(requests[i]), t0);
      ASSERT_EQ(fc->dispatchCycle(t0).kind, DispatchResult::Kind::kDispatched);
    }
    EXPECT_EQ(counter.count(), 0u);
  }
  const FlowControllerStats stats = fc->stats();
  EXPECT_EQ(stats.bands[0].requestedOutcomes.size(), kRequestedPriorityLabelLimit);
  EXPECT_EQ(stats.untrackedRequestedOutcomes, 2000u * 36 / 100);
}

// ---------------------------------------------------------------------------------------------
// fairness_id labels of the queue gauges

TEST_F(FlowMetricLabelsTest, MoreFlowsThanTheCapGiveCapPlusOneLabelValuesAndTheSums) {
  auto o = options();
  o.fairnessIdLabelLimit = 3;
  o.bands = {{.priority = 10}};
  auto fc = make(std::move(o));
  // Flow fK has K + 1 requests (100 bytes each), split over bands 10 and 0.
  std::uint64_t queued = 0;
  for (int k = 0; k < 10; ++k) {
    for (int i = 0; i <= k; ++i) {
      fc->enqueue(request("f" + std::to_string(k), i % 2 == 0 ? 10 : 0, 0, 100), t0);
      ++queued;
    }
  }
  const FlowControllerStats stats = fc->stats();
  EXPECT_EQ(stats.fairnessIdLabelLimit, 3u);
  std::set<std::string> named;
  for (const BandStats& b : stats.bands) {
    std::size_t requests = b.otherFlowsQueuedRequests;
    std::uint64_t bytes = b.otherFlowsQueuedBytes;
    for (const FlowQueueStats& f : b.flowQueues) {
      named.insert(f.flowId);
      requests += f.queuedRequests;
      bytes += f.queuedBytes;
    }
    EXPECT_EQ(requests, b.queuedRequests) << b.priority;
    EXPECT_EQ(bytes, b.queuedBytes) << b.priority;
  }
  // The three flows with the most queued requests.
  EXPECT_EQ(named, (std::set<std::string>{"f7", "f8", "f9"}));

  const std::string text = renderPrometheus(stats);
  for (const std::string name :
       {"holdback_flow_control_queue_size", "holdback_flow_control_queue_bytes"}) {
    std::set<std::string> ids;
    std::map<std::string, double> perBand;
    double sum = 0.0;
    for (const auto& [labels, v] : samplesOf(text, name)) {
      ASSERT_EQ(labels.size(), 2u);
      EXPECT_EQ(labels[0].first, "priority");
      EXPECT_EQ(labels[1].first, "fairness_id");
      ids.insert(labels[1].second);
      perBand[labels[0].second] += v;
      sum += v;
    }
    EXPECT_EQ(ids.size(), 4u) << name;  // cap + 1
    EXPECT_EQ(ids.count("other"), 1u);
    const bool bytes = name.ends_with("bytes");
    EXPECT_EQ(sum, double(bytes ? queued * 100 : queued)) << name;
    for (const BandStats& b : stats.bands) {
      EXPECT_EQ(perBand[std::to_string(b.priority)],
                double(bytes ? b.queuedBytes : b.queuedRequests));
    }
  }
  EXPECT_NE(text.find("holdback_flow_control_queue_size{priority=\"10\",fairness_id=\"f9\","
                      "inference_pool=\"default\"} 5\n"),
            std::string::npos)
      << text;
}

TEST_F(FlowMetricLabelsTest, FewFlowsAreAllNamedAndEveryBandHasItsOtherSeries) {
  auto o = options();
  o.bands = {{.priority = 10}};
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0, 0, 7), t0);
  fc->enqueue(request("other", 0, 0, 5), t0);  // a flow named like the bucket shares it
  const std::string text = renderPrometheus(fc->stats());
  const auto sizes = samplesOf(text, "holdback_flow_control_queue_size");
  EXPECT_EQ(sizes.size(), 3u) << text;
  EXPECT_EQ(sizes.at({{"priority", "0"}, {"fairness_id", "a"}}), 1.0);
  EXPECT_EQ(sizes.at({{"priority", "0"}, {"fairness_id", "other"}}), 1.0);
  EXPECT_EQ(sizes.at({{"priority", "10"}, {"fairness_id", "other"}}), 0.0);  // empty band
  const auto bytes = samplesOf(text, "holdback_flow_control_queue_bytes");
  EXPECT_EQ(bytes.at({{"priority", "0"}, {"fairness_id", "other"}}), 5.0);
}

TEST_F(FlowMetricLabelsTest, LimitZeroKeepsOneSeriesPerBandAndIsReloadable) {
  auto o = options();
  o.fairnessIdLabelLimit = 0;
  auto fc = make(std::move(o));
  fc->enqueue(request("a", 0), t0);
  fc->enqueue(request("b", 0), t0);
  FlowControllerStats stats = fc->stats();
  EXPECT_TRUE(stats.bands[0].flowQueues.empty());
  std::string text = renderPrometheus(stats);
  EXPECT_NE(text.find("holdback_flow_control_queue_size{priority=\"0\",inference_pool=\"default\"}"
                      " 2\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("fairness_id"), std::string::npos);

  auto reloaded = options();
  reloaded.fairnessIdLabelLimit = 1;
  ASSERT_FALSE(fc->reconfigure(std::move(reloaded)).hasErrors());
  text = renderPrometheus(fc->stats());
  const auto sizes = samplesOf(text, "holdback_flow_control_queue_size");
  EXPECT_EQ(sizes.size(), 2u) << text;
  // Equal queues: the smaller id is named.
  EXPECT_EQ(sizes.at({{"priority", "0"}, {"fairness_id", "a"}}), 1.0);
  EXPECT_EQ(sizes.at({{"priority", "0"}, {"fairness_id", "other"}}), 1.0);
}

TEST(FlowMetricLabelsConfigTest, FairnessIdLabelLimitLoadsAndIsValidatedWithItsPath) {
  const auto load = [](const std::string& value) {
    return config::loadEndpointPickerConfigText(
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: "
        "[flowControl]\nflowControl:\n  fairnessIdLabelLimit: " +
        value + "\n");
  };
  {
    const auto loaded = load("25");
    ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
    EXPECT_EQ(loaded.value()->controller.fairnessIdLabelLimit, 25u);
  }
  {
    const auto loaded = load("0");
    ASSERT_TRUE(loaded) << loaded.diagnostics().toString();
    EXPECT_EQ(loaded.value()->controller.fairnessIdLabelLimit, 0u);
  }
  for (const std::string bad : {"-1", "1000001", "\"many\"", "2.5"}) {
    const auto loaded = load(bad);
    EXPECT_FALSE(loaded) << bad;
    const std::string text = loaded.diagnostics().toString();
    EXPECT_NE(text.find("/flowControl/fairnessIdLabelLimit"), std::string::npos) << text;
  }
  const auto defaults = config::loadEndpointPickerConfigText(
      "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nfeatureGates: [flowControl]\n");
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults.value()->controller.fairnessIdLabelLimit, kDefaultFairnessIdLabelLimit);
}

}  // namespace
}  // namespace holdback
