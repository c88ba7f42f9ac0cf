// What the gateway's Redis clients take from Redis (replica_input.hpp): a replica's pending work,
// the feed's events, replica identities, the key prefix and the config fingerprint, and the
// rate-limited log of what was ignored. Hostile and overflowing values are rejected with their
// reason; nothing needs a server.
#include "replica_input.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace holdback::gateway {
namespace {

using L = ReplicaInputLimits;

RejectReason pendingRejected(std::string_view text) {
  InFlightLoad out;
  RejectReason why{};
  EXPECT_FALSE(parsePending(text, out, why)) << "taken: " << text;
  return why;
}

TEST(ReplicaInput, PendingWorkIsTwoBoundedCounts) {
  InFlightLoad p;
  RejectReason why{};
  ASSERT_TRUE(parsePending("3 4096", p, why));
  EXPECT_EQ(p.requests, 3);
  EXPECT_EQ(p.tokens, 4096);
  ASSERT_TRUE(parsePending("0 " + std::to_string(L::kMaxPending), p, why));
  EXPECT_EQ(p.tokens, L::kMaxPending);
  EXPECT_EQ(pendingRejected("-1 5"), RejectReason::kNegative);
  EXPECT_EQ(pendingRejected("1 -5"), RejectReason::kNegative);
  // Beyond the ledger's cap, and beyond 64 bits: two of these summed used to overflow.
  EXPECT_EQ(pendingRejected("9223372036854775807 1"), RejectReason::kOutOfRange);
  EXPECT_EQ(pendingRejected("1 99999999999999999999"), RejectReason::kOutOfRange);
  EXPECT_EQ(pendingRejected("1 " + std::to_string(L::kMaxPending + 1)), RejectReason::kOutOfRange);
  EXPECT_EQ(pendingRejected("1"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("1 2 3"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("1  2"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected(" 1 2"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("1 2x"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("1.5 2"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("nan 2"), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected(""), RejectReason::kMalformed);
  EXPECT_EQ(pendingRejected("1 " + std::string(100, '0')), RejectReason::kTooLong);
}

TEST(ReplicaInput, SumsSaturateInsteadOfOverflowing) {
  EXPECT_EQ(saturatingAdd(2, 3, 10), 5);
  EXPECT_EQ(saturatingAdd(7, 3, 10), 10);
  EXPECT_EQ(saturatingAdd(7, 4, 10), 10);
  EXPECT_EQ(saturatingAdd(L::kMaxPending, L::kMaxPending, L::kMaxPending), L::kMaxPending);
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(saturatingAdd(kMax - 1, kMax, kMax), kMax);
  EXPECT_EQ(saturatingAdd(kMax, 0, kMax), kMax);
  // The most replicas a round reads, each at the bound: the sum stays at the cap.
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < L::kMaxReplicas; ++i)
    sum = saturatingAdd(sum, L::kMaxPending, L::kMaxPending);
  EXPECT_EQ(sum, L::kMaxPending);
}

RejectReason eventRejected(std::string_view line) {
  FeedEvent e;
  RejectReason why{};
  EXPECT_FALSE(parseFeedEvent(line, e, why)) << "taken: " << line;
  return why;
}

TEST(ReplicaInput, FeedEventsAreParsedStrictly) {
  FeedEvent e;
  RejectReason why{};
  ASSERT_TRUE(parseFeedEvent("D 10 http://a:1", e, why));
  EXPECT_EQ(e.kind, 'D');
  EXPECT_EQ(e.tokens, 10);
  EXPECT_EQ(e.url, "http://a:1");
  ASSERT_TRUE(parseFeedEvent("C 0 http://a:1", e, why));
  EXPECT_EQ(e.kind, 'C');
  ASSERT_TRUE(parseFeedEvent("A 5 -3", e, why));
  EXPECT_EQ(e.kind, 'A');
  EXPECT_EQ(e.priority, -3);
  EXPECT_EQ(e.tokens, 5);
  EXPECT_EQ(eventRejected("A 5 2147483648"), RejectReason::kOutOfRange);  // atoi's undefined case
  EXPECT_EQ(eventRejected("A 5 ten"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("A 1 2 3"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("D -5 http://a:1"), RejectReason::kNegative);
  EXPECT_EQ(eventRejected("D 99999999999999999999 http://a:1"), RejectReason::kOutOfRange);
  EXPECT_EQ(eventRejected("D 1"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("D 1 "), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("D 1 http://a b"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("X 1 http://a:1"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("D1 http://a:1"), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected(""), RejectReason::kMalformed);
  EXPECT_EQ(eventRejected("D 1 " + std::string(5000, 'u')), RejectReason::kTooLong);
}

TEST(ReplicaInput, FeedHeadersAndReplicaIdentities) {
  std::string_view id;
  std::string_view fp;
  RejectReason why{};
  ASSERT_TRUE(parseFeedHeader("host-12-345 0123456789abcdef", id, fp, why));
  EXPECT_EQ(id, "host-12-345");
  EXPECT_EQ(fp, "0123456789abcdef");
  EXPECT_FALSE(parseFeedHeader("host-12-345", id, fp, why));  // an older build: no fingerprint
  EXPECT_EQ(why, RejectReason::kFingerprint);
  EXPECT_FALSE(parseFeedHeader("", id, fp, why));
  EXPECT_EQ(why, RejectReason::kMalformed);
  EXPECT_FALSE(parseFeedHeader(std::string("a\x01") + "b fp", id, fp, why));
  EXPECT_EQ(why, RejectReason::kMalformed);
  EXPECT_FALSE(parseFeedHeader(std::string(300, 'h') + " fp", id, fp, why));
  EXPECT_EQ(why, RejectReason::kTooLong);
  EXPECT_FALSE(parseFeedHeader("h " + std::string(100, 'f'), id, fp, why));
  EXPECT_EQ(why, RejectReason::kTooLong);
  EXPECT_TRUE(validReplicaId("gw-1-2", why));
  EXPECT_FALSE(validReplicaId("gw 1", why));
  EXPECT_EQ(why, RejectReason::kMalformed);
  EXPECT_FALSE(validReplicaId(std::string(L::kMaxIdBytes + 1, 'x'), why));
  EXPECT_EQ(why, RejectReason::kTooLong);
}

TEST(ReplicaInput, FingerprintAndDefaultPrefixFollowTheConfigAndTheServers) {
  const std::string a = configFingerprint("config A", {"http://s1:1", "http://s2:2"});
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  // The servers in any order: the same fingerprint.
  EXPECT_EQ(configFingerprint("config A", {"http://s2:2", "http://s1:1"}), a);
  EXPECT_NE(configFingerprint("config B", {"http://s1:1", "http://s2:2"}), a);
  EXPECT_NE(configFingerprint("config A", {"http://s1:1", "http://s3:3"}), a);
  EXPECT_NE(configFingerprint("config A", {"http://s1:1"}), a);
  // Text moved between the config and a server name is not the same input.
  EXPECT_NE(configFingerprint("config Ahttp://s1:1", {}),
            configFingerprint("config A", {"http://s1:1"}));
  EXPECT_EQ(defaultKeyPrefix(a), "holdback:" + a.substr(0, 8) + ":");
  std::string error;
  EXPECT_TRUE(validKeyPrefix("fleet-a:", error));
  EXPECT_FALSE(validKeyPrefix("", error));
  EXPECT_FALSE(validKeyPrefix("fleet a", error));
  EXPECT_EQ(error, "printable ASCII without spaces");
  EXPECT_FALSE(validKeyPrefix(std::string(129, 'p'), error));
  EXPECT_EQ(error, "1 to 128 characters");
}

TEST(ReplicaInput, PrintableEscapesAndTruncates) {
  EXPECT_EQ(printable("ok"), "ok");
  EXPECT_EQ(printable(std::string("a\nb\x7f\\", 5)), "a\\x0ab\\x7f\\x5c");
  EXPECT_EQ(printable(std::string(100, 'x'), 4), "xxxx... (100 bytes)");
}

std::string readAll(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[512];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

std::size_t lines(const std::string& text) {
  std::size_t n = 0;
  for (const char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(ReplicaInput, TheLogCountsEveryValueAndSaysSoOncePerReasonPerInterval) {
  RejectCounters counters{};
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ReplicaInputLog log("replica sync", counters, std::chrono::seconds(30), out);
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 5; ++i) {
    log.reject(RejectReason::kTime, "replica x, field @restore", "1 1 1 1 0 0 1 10 0",
               t0 + std::chrono::seconds(i));
  }
  log.reject(RejectReason::kNegative, "replica x, field http://a:1", "-1 5", t0);
  EXPECT_EQ(counters[std::size_t(RejectReason::kTime)].load(), 5u);
  EXPECT_EQ(counters[std::size_t(RejectReason::kNegative)].load(), 1u);
  std::string text = readAll(out);
  EXPECT_EQ(lines(text), 2u) << text;
  EXPECT_NE(text.find("replica sync: ignored a value read from Redis (time): replica x, field "
                      "@restore: \"1 1 1 1 0 0 1 10 0\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(negative)"), std::string::npos) << text;
  // After the interval: one more line, with how many were ignored since the last.
  log.reject(RejectReason::kTime, "replica x, field @restore", "0 0 0 0 0 0 1 1 0",
             t0 + std::chrono::seconds(31));
  text = readAll(out);
  EXPECT_EQ(lines(text), 3u) << text;
  EXPECT_NE(text.find("5 ignored for time since the last such line"), std::string::npos) << text;
  // Another fingerprint: counted every time, said once per replica.
  log.foreign("gw-9-9", "ffff", "0000");
  log.foreign("gw-9-9", "ffff", "0000");
  log.foreign("gw-8-8", "", "0000");
  EXPECT_EQ(counters[std::size_t(RejectReason::kFingerprint)].load(), 3u);
  text = readAll(out);
  EXPECT_EQ(lines(text), 5u) << text;
  EXPECT_NE(text.find("ignoring replica gw-9-9: it publishes config fingerprint \"ffff\", this "
                      "replica 0000"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ignoring replica gw-8-8: it publishes config fingerprint (none)"),
            std::string::npos)
      << text;
  std::fclose(out);
}

TEST(ReplicaInput, EveryReasonHasItsLabel) {
  std::vector<std::string> names;
  for (std::size_t r = 0; r < kRejectReasons; ++r) names.emplace_back(toString(RejectReason(r)));
  EXPECT_EQ(names,
            (std::vector<std::string>{"malformed", "not_finite", "negative", "out_of_range", "time",
                                      "too_long", "too_many", "wrong_type", "fingerprint"}));
}

}  // namespace
}  // namespace holdback::gateway
