#include "holdback/metrics/prometheus.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include "holdback/core/text.hpp"
#include "holdback/metrics/prometheus_parser.hpp"

namespace holdback {
namespace {

using Label = PrometheusWriter::Label;

// The exposition format's three escapes, and nothing else (Envoy pins the same string).
TEST(PrometheusWriterTest, EscapesBackslashQuoteAndNewlineInLabelValues) {
  EXPECT_EQ(escapeLabelValue("val\"ue with\\ some\n issues"), "val\\\"ue with\\\\ some\\n issues");
  EXPECT_EQ(escapeLabelValue("tab\tand unicode \xc2\xb5 stay"), "tab\tand unicode \xc2\xb5 stay");
  EXPECT_EQ(escapeLabelValue(""), "");
}

// A label value from a client (a fairness id) with bytes that are not UTF-8: the exposition
// format needs UTF-8, and one bad value made scrapers reject every metric of the text.
TEST(PrometheusWriterTest, IllFormedUtf8InLabelValuesBecomesReplacementCharacters) {
  EXPECT_EQ(escapeLabelValue("\xff\xfe\x80"
                             "bad\""),
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "bad\\\"");
  PrometheusWriter w("holdback_");
  w.family("queue", "gauge", "help");
  w.sample("queue", {Label{"fairness_id", "\xc3\x28\xa0"}}, 1.0);
  const std::string text = w.text();
  EXPECT_TRUE(isValidUtf8(text)) << text;
  EXPECT_NE(text.find("fairness_id=\"\xef\xbf\xbd(\xef\xbf\xbd\""), std::string::npos) << text;
}

TEST(PrometheusWriterTest, FormatsNumbersShortestWithSpecialValues) {
  EXPECT_EQ(formatSampleValue(0.25), "0.25");
  EXPECT_EQ(formatSampleValue(3.0), "3");
  EXPECT_EQ(formatSampleValue(-2.5), "-2.5");
  EXPECT_EQ(formatSampleValue(1e-7), "1e-07");
  EXPECT_EQ(formatSampleValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(formatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(formatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(formatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusWriterTest, FamiliesSamplesAndConstantLabels) {
  PrometheusWriter w("app_", {{"pool", "a\"b"}});
  w.family("queue", "gauge", "Queued.\nSecond line with \\.");
  w.sample("queue", {Label{"band", "0"}}, 2.5);
  w.sample("queue", {}, std::uint64_t{18446744073709551615u});
  EXPECT_EQ(w.text(),
            "# HELP app_queue Queued.\\nSecond line with \\\\.\n"
            "# TYPE app_queue gauge\n"
            "app_queue{band=\"0\",pool=\"a\\\"b\"} 2.5\n"
            "app_queue{pool=\"a\\\"b\"} 18446744073709551615\n");
}

TEST(PrometheusWriterTest, NoBracesWithoutLabels) {
  PrometheusWriter w;
  w.sample("up", {}, 1.0);
  EXPECT_EQ(w.take(), "up 1\n");
}

TEST(PrometheusWriterTest, HistogramIsCumulativeWithInfBucketSumAndCount) {
  PrometheusWriter w;
  const std::array<double, 2> bounds{0.5, 1.0};
  const std::array<std::uint64_t, 3> counts{1, 2, 3};
  const Label labels[] = {{"k", "v"}};
  w.histogram("lat", labels, bounds, counts, 7.25);
  EXPECT_EQ(w.text(),
            "lat_bucket{k=\"v\",le=\"0.5\"} 1\n"
            "lat_bucket{k=\"v\",le=\"1\"} 3\n"
            "lat_bucket{k=\"v\",le=\"+Inf\"} 6\n"
            "lat_sum{k=\"v\"} 7.25\n"
            "lat_count{k=\"v\"} 6\n");
}

// What the writer writes, the parser reads back, escapes and special values included.
TEST(PrometheusWriterTest, RoundTripsThroughTheParser) {
  PrometheusWriter w("", {{"model", "m\"1\\\n"}});
  w.family("g", "gauge", "help");
  w.sample("g", {Label{"x", "y"}}, -std::numeric_limits<double>::infinity());
  const ParsedPrometheusText parsed = parsePrometheusText(w.text());
  ASSERT_EQ(parsed.samples.size(), 1u);
  EXPECT_EQ(parsed.skippedLines, 0u);
  EXPECT_EQ(parsed.samples[0].label("model"), "m\"1\\\n");
  EXPECT_EQ(parsed.samples[0].label("x"), "y");
  EXPECT_EQ(parsed.samples[0].value, -std::numeric_limits<double>::infinity());
}

TEST(RenderPrometheusTest, EscapesThePoolLabelAndSharesTheBandLoops) {
  FlowControllerStats stats;
  BandStats band;
  band.priority = 10;
  band.provisioned = true;
  band.queuedRequests = 3;
  band.maxRequests = 6;
  band.lastCeiling = 0.5;
  stats.bands.push_back(band);
  stats.cycles = 4;
  const std::string text = renderPrometheus(stats, "po\"ol\n");
  EXPECT_NE(text.find("holdback_flow_control_queue_size{priority=\"10\",inference_pool="
                      "\"po\\\"ol\\n\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("holdback_flow_control_capacity_utilization_requests{priority=\"10\","
                      "inference_pool=\"po\\\"ol\\n\"} 0.5\n"),
            std::string::npos);
  EXPECT_NE(text.find("holdback_flow_control_dispatch_cycles_total{inference_pool=\"po\\\"ol\\n\"} "
                      "4\n"),
            std::string::npos);
  const ParsedPrometheusText parsed = parsePrometheusText(text);
  EXPECT_EQ(parsed.skippedLines, 0u);
  EXPECT_GT(parsed.samples.size(), 10u);
}

TEST(RenderPrometheusTest, EvictionMetricsUseUpstreamNamesOnlyWhenEnabled) {
  FlowControllerStats stats;
  EXPECT_EQ(renderPrometheus(stats).find("revocations"), std::string::npos);
  stats.eviction.enabled = true;
  stats.eviction.issuedByPriority = {{-5, 2}, {-1, 3}};
  stats.eviction.issued = 5;
  stats.eviction.confirmed = 4;
  stats.eviction.timedOut = 1;
  stats.eviction.reclaimTarget = 0.25;
  stats.eviction.pendingReclaim = 0.125;
  stats.eviction.confirmationBuckets[2] = 3;  // (5 ms, 10 ms]
  stats.eviction.confirmationBuckets[6] = 1;  // (100 ms, 250 ms]
  stats.eviction.confirmationSumSeconds = 0.2;
  const std::string text = renderPrometheus(stats, "p");
  for (const char* line :
       {"holdback_flow_control_revocations_issued_total{priority=\"-5\",inference_pool=\"p\"} 2\n",
        "holdback_flow_control_revocations_issued_total{priority=\"-1\",inference_pool=\"p\"} 3\n",
        "holdback_flow_control_revocations_total{outcome=\"confirmed\",inference_pool=\"p\"} 4\n",
        "holdback_flow_control_revocations_total{outcome=\"timed_out\",inference_pool=\"p\"} 1\n",
        "holdback_flow_control_reclaim_target{inference_pool=\"p\"} 0.25\n",
        "holdback_flow_control_pending_reclaim{inference_pool=\"p\"} 0.125\n",
        "holdback_flow_control_revocation_confirmation_seconds_bucket{le=\"0.01\",inference_pool="
        "\"p\"} 3\n",
        "holdback_flow_control_revocation_confirmation_seconds_bucket{le=\"0.25\",inference_pool="
        "\"p\"} 4\n",
        "holdback_flow_control_revocation_confirmation_seconds_count{inference_pool=\"p\"} 4\n",
        "holdback_flow_control_revocations_by_reason_total{reason=\"blocked\",inference_pool="
        "\"p\"} 5\n",
        "holdback_flow_control_revocations_by_reason_total{reason=\"reserve\",inference_pool="
        "\"p\"} 0\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(parsePrometheusText(text).skippedLines, 0u);
}

// Reserve restoration's revocations (EvictionStats::restored) have their own series, next to
// the head-of-line ones; the two reasons sum to flow_control_revocations_issued_total.
TEST(RenderPrometheusTest, RevocationsByReasonSplitRestorationFromBlocks) {
  FlowControllerStats stats;
  stats.eviction.enabled = true;
  stats.eviction.issuedByPriority = {{-1, 7}};
  stats.eviction.issued = 7;
  stats.eviction.restored = 5;
  const std::string text = renderPrometheus(stats, "p");
  EXPECT_NE(text.find("# TYPE holdback_flow_control_revocations_by_reason_total counter\n"),
            std::string::npos)
      << text;
  const ParsedPrometheusText parsed = parsePrometheusText(text);
  EXPECT_EQ(parsed.skippedLines, 0u);
  std::map<std::string, double> byReason;
  for (const auto& sample : parsed.samples) {
    if (sample.name != "holdback_flow_control_revocations_by_reason_total") continue;
    if (const auto reason = sample.label("reason")) byReason[std::string(*reason)] = sample.value;
  }
  ASSERT_EQ(byReason.size(), 2u) << text;
  EXPECT_EQ(byReason["blocked"], 2.0);
  EXPECT_EQ(byReason["reserve"], 5.0);
}

// `promtool check metrics` (Debian package prometheus) accepts the eviction families, the
// reason split included; skipped when promtool is not installed.
TEST(RenderPrometheusTest, EvictionFamiliesPassPromtool) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  }
  FlowControllerStats stats;
  stats.eviction.enabled = true;
  stats.eviction.issuedByPriority = {{-1, 7}};
  stats.eviction.issued = 7;
  stats.eviction.restored = 5;
  stats.eviction.confirmed = 6;
  stats.eviction.confirmationBuckets[2] = 6;
  stats.eviction.confirmationSumSeconds = 0.05;
  const std::string text = renderPrometheus(stats, "p");
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("holdback-promtool-" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::ofstream(file, std::ios::binary) << text;
  const int rc = std::system(("promtool check metrics < " + file + " >&2").c_str());
  std::filesystem::remove(file);
  EXPECT_EQ(rc, 0) << text;
}

}  // namespace
}  // namespace holdback
