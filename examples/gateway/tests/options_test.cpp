// The gateway's command line (options.cpp): values land in Options, and a bad command line is
// reported whole, every bad flag with its value, before the gateway gives up.
#include "options.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace holdback::gateway {
namespace {

struct Parsed {
  int rc = 0;
  Options options;
  std::string stderrText;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "holdback-gateway");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  Parsed out;
  ::testing::internal::CaptureStderr();
  out.rc = parseArgs(static_cast<int>(argv.size()), argv.data(), out.options);
  out.stderrText = ::testing::internal::GetCapturedStderr();
  return out;
}

TEST(GatewayOptionsTest, ValuesLandInOptions) {
  const Parsed p = parse({"--endpoint", "http://127.0.0.1:8001/", "--endpoint=http://h:2",
                          "--threads", "3", "--max-body-bytes=1024", "--listen", "0.0.0.0:8080",
                          "--objective", "chat=7", "--model", "m1"});
  ASSERT_EQ(p.rc, 0) << p.stderrText;
  EXPECT_EQ(p.options.endpointUrls,
            (std::vector<std::string>{"http://127.0.0.1:8001", "http://h:2"}));
  EXPECT_EQ(p.options.threads, 3);
  EXPECT_EQ(p.options.maxBodyBytes, 1024u);
  EXPECT_EQ(p.options.listen.host, "0.0.0.0");
  EXPECT_EQ(p.options.listen.port, 8080);
  EXPECT_EQ(p.options.models, std::vector<std::string>{"m1"});
  EXPECT_TRUE(p.stderrText.empty()) << p.stderrText;
}

TEST(GatewayOptionsTest, OverloadLimitsLandAndTheBudgetHoldsABody) {
  const Parsed d = parse({"--endpoint", "http://h:1"});
  ASSERT_EQ(d.rc, 0) << d.stderrText;
  EXPECT_EQ(d.options.maxBufferedBytes, 0u);  // the machine's default, chosen at start
  EXPECT_EQ(d.options.maxResponseBytes, std::size_t{64} << 20);
  EXPECT_EQ(d.options.maxConnectionsPerClient, 1024);
  const Parsed p = parse({"--endpoint", "http://h:1", "--max-buffered-bytes", "5000000",
                          "--max-response-bytes", "1000", "--max-connections-per-client", "3"});
  ASSERT_EQ(p.rc, 0) << p.stderrText;
  EXPECT_EQ(p.options.maxBufferedBytes, 5000000u);
  EXPECT_EQ(p.options.maxResponseBytes, 1000u);
  EXPECT_EQ(p.options.maxConnectionsPerClient, 3);
  const Parsed small = parse({"--endpoint", "http://h:1", "--max-buffered-bytes", "1000"});
  EXPECT_EQ(small.rc, 1);
  EXPECT_NE(small.stderrText.find("--max-buffered-bytes: 1000 is below --max-body-bytes (4194304)"),
            std::string::npos)
      << small.stderrText;
  const Parsed zero = parse({"--endpoint", "http://h:1", "--max-connections-per-client", "0"});
  EXPECT_EQ(zero.rc, 1);
}

TEST(GatewayOptionsTest, EveryBadFlagIsReportedInOneRun) {
  const Parsed p = parse({"--threads", "0", "--endpoint", "ftp://x", "--max-connections=-5",
                          "--bogus", "--listen", "nowhere", "--objective", "chat",
                          "--max-scrape-bytes", "12x", "--config"});
  EXPECT_EQ(p.rc, 1);
  for (const char* expected :
       {"--threads: \"0\" is not a positive integer",
        "--endpoint: \"ftp://x\" is not http://HOST:PORT",
        "--max-connections: \"-5\" is not a positive integer", "unknown argument \"--bogus\"",
        "--listen: \"nowhere\" is not HOST:PORT", "--objective: expected NAME=PRIORITY",
        "--max-scrape-bytes: \"12x\" is not a positive integer", "--config needs a value",
        "usage: holdback-gateway"}) {
    EXPECT_NE(p.stderrText.find(expected), std::string::npos) << expected << "\n" << p.stderrText;
  }
  // A bad --endpoint is reported as bad, not also as missing.
  EXPECT_EQ(p.stderrText.find("at least one --endpoint"), std::string::npos) << p.stderrText;
}

TEST(GatewayOptionsTest, ValuesBeyondWhatTheGatewayCanUseAreRefused) {
  // 4294967296 header bytes wrapped to a limit of 0 (every request 431); a million threads
  // aborted the process. Both are now reported like any bad value, with the largest allowed.
  const Parsed p = parse({"--endpoint", "http://h:1", "--max-header-bytes", "4294967296",
                          "--threads", "1000000", "--max-connections", "99999999999"});
  EXPECT_EQ(p.rc, 1);
  for (const char* expected :
       {"--max-header-bytes: \"4294967296\" is over the largest allowed, 67108864",
        "--threads: \"1000000\" is over the largest allowed, 256",
        "--max-connections: \"99999999999\" is over the largest allowed, 2147483647"}) {
    EXPECT_NE(p.stderrText.find(expected), std::string::npos) << expected << "\n" << p.stderrText;
  }
  const Parsed edge =
      parse({"--endpoint", "http://h:1", "--max-header-bytes", "67108864", "--threads", "256"});
  ASSERT_EQ(edge.rc, 0) << edge.stderrText;
  EXPECT_EQ(edge.options.maxHeaderBytes, std::size_t{64} << 20);
  EXPECT_EQ(edge.options.threads, 256);
}

TEST(GatewayOptionsTest, MissingEndpointIsAnError) {
  const Parsed p = parse({"--threads", "2"});
  EXPECT_EQ(p.rc, 1);
  EXPECT_NE(p.stderrText.find("at least one --endpoint is required"), std::string::npos);
}

TEST(GatewayOptionsTest, HelpPrintsUsageAndStillFailsAfterABadFlag) {
  testing::internal::CaptureStdout();
  const Parsed help = parse({"--help"});
  EXPECT_NE(testing::internal::GetCapturedStdout().find("usage: holdback-gateway"),
            std::string::npos);
  EXPECT_EQ(help.rc, 2);  // printed what was asked: exit 0
  testing::internal::CaptureStdout();
  const Parsed bad = parse({"--threads", "0", "--help"});
  (void)testing::internal::GetCapturedStdout();
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.stderrText.find("--threads: \"0\""), std::string::npos) << bad.stderrText;
}

TEST(GatewayOptionsTest, SlotSettingsPerEndpointAndPoolWide) {
  const Parsed p = parse({"--endpoint", "http://127.0.0.1:8001,slots=8", "--endpoint", "http://h:2",
                          "--endpoint-slots", "4"});
  ASSERT_EQ(p.rc, 0) << p.stderrText;
  EXPECT_EQ(p.options.endpointUrls,
            (std::vector<std::string>{"http://127.0.0.1:8001", "http://h:2"}));
  EXPECT_EQ(p.options.endpointSlots, (std::vector<std::int64_t>{8, 0}));
  EXPECT_EQ(p.options.poolSlots, 4);
}

TEST(GatewayOptionsTest, ASlotSettingOfZeroIsIgnoredWithAWarningAndBadOnesAreErrors) {
  const Parsed zero = parse({"--endpoint", "http://h:1,slots=0", "--endpoint-slots", "0"});
  ASSERT_EQ(zero.rc, 0) << zero.stderrText;
  EXPECT_EQ(zero.options.endpointSlots, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(zero.options.poolSlots, 0);
  EXPECT_NE(zero.stderrText.find("warning: --endpoint http://h:1,slots=0: 0 slots would admit "
                                 "nothing; ignored"),
            std::string::npos)
      << zero.stderrText;
  EXPECT_NE(zero.stderrText.find("warning: --endpoint-slots: 0 slots"), std::string::npos)
      << zero.stderrText;
  const Parsed bad =
      parse({"--endpoint", "http://h:1,slots=-2", "--endpoint", "http://h:2,seats=3",
             "--endpoint-slots", "many", "--endpoint", "http://h:3,slots=4294967296"});
  EXPECT_EQ(bad.rc, 1);
  for (const char* v : {"\"slots=-2\"", "\"seats=3\"", "\"many\"", "\"slots=4294967296\""}) {
    EXPECT_NE(bad.stderrText.find(v), std::string::npos) << v << "\n" << bad.stderrText;
  }
  EXPECT_NE(bad.stderrText.find("integer in [1, 4294967295]"), std::string::npos) << bad.stderrText;
}

TEST(GatewayOptionsTest, ApiKeysAndAdminListener) {
  const Parsed none = parse({"--endpoint", "http://h:1"});
  ASSERT_EQ(none.rc, 0) << none.stderrText;
  EXPECT_TRUE(none.options.apiKeysFile.empty());
  EXPECT_FALSE(none.options.adminListen.has_value());
  const Parsed p = parse({"--endpoint", "http://h:1", "--api-keys", "/etc/keys.yaml",
                          "--admin-listen=127.0.0.1:9090"});
  ASSERT_EQ(p.rc, 0) << p.stderrText;
  EXPECT_EQ(p.options.apiKeysFile, "/etc/keys.yaml");
  ASSERT_TRUE(p.options.adminListen.has_value());
  EXPECT_EQ(p.options.adminListen->host, "127.0.0.1");
  EXPECT_EQ(p.options.adminListen->port, 9090);
  const Parsed bad =
      parse({"--endpoint", "http://h:1", "--api-keys=", "--admin-listen", "nowhere"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.stderrText.find("--api-keys: the file name is empty"), std::string::npos)
      << bad.stderrText;
  EXPECT_NE(bad.stderrText.find("--admin-listen: \"nowhere\" is not HOST:PORT"), std::string::npos)
      << bad.stderrText;
}

// --replica-sync redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: AUTH with or without an ACL user,
// a database, %-encoded characters; the password never shows in what is printed.
TEST(GatewayOptionsTest, RedisUrlsCarryAuthAndADatabase) {
  const Parsed plain =
      parse({"--endpoint", "http://h:1", "--replica-sync", "redis://127.0.0.1:6379"});
  ASSERT_EQ(plain.rc, 0) << plain.stderrText;
  EXPECT_EQ(plain.options.replicaSync.host, "127.0.0.1");
  EXPECT_EQ(plain.options.replicaSync.port, 6379);
  EXPECT_EQ(plain.options.replicaSync.password, "");
  EXPECT_EQ(plain.options.replicaSync.db, 0);
  EXPECT_EQ(plain.options.replicaSync.describe(), "127.0.0.1:6379");
  EXPECT_EQ(plain.options.replicaSyncPrefix, "");  // derived from the config at start

  const Parsed pass = parse({"--endpoint", "http://h:1", "--replica-sync=redis://:s3cret@r:6380/2",
                             "--replica-sync-prefix", "fleet-a:"});
  ASSERT_EQ(pass.rc, 0) << pass.stderrText;
  EXPECT_EQ(pass.options.replicaSync.host, "r");
  EXPECT_EQ(pass.options.replicaSync.port, 6380);
  EXPECT_EQ(pass.options.replicaSync.user, "");
  EXPECT_EQ(pass.options.replicaSync.password, "s3cret");
  EXPECT_EQ(pass.options.replicaSync.db, 2);
  EXPECT_EQ(pass.options.replicaSync.describe(), "r:6380/2 (AUTH)");
  EXPECT_EQ(pass.options.replicaSyncPrefix, "fleet-a:");

  std::string error;
  const auto acl = parseRedisUrl("redis://alice:p%40ss%3Aw@r:1/", error);
  ASSERT_TRUE(acl.has_value()) << error;
  EXPECT_EQ(acl->user, "alice");
  EXPECT_EQ(acl->password, "p@ss:w");
  EXPECT_EQ(acl->db, 0);
  EXPECT_EQ(acl->describe(), "r:1 (AUTH as alice)");
  const auto at = parseRedisUrl("redis://:p@ss@r:1", error);  // the last '@' ends the password
  ASSERT_TRUE(at.has_value()) << error;
  EXPECT_EQ(at->password, "p@ss");
  EXPECT_EQ(at->host, "r");
}

TEST(GatewayOptionsTest, BadRedisUrlsAreReportedWithoutThePassword) {
  const Parsed p = parse({"--endpoint",
                          "http://h:1",
                          "--replica-sync",
                          "redis://:s3cret@h:0",
                          "--replica-sync",
                          "redis://h",
                          "--replica-sync",
                          "http://h:1",
                          "--replica-sync",
                          "redis://s3cret@h:1",
                          "--replica-sync",
                          "redis://:s3cret@h:1/x",
                          "--replica-sync",
                          "redis://:@h:1",
                          "--replica-sync",
                          "redis://:s3cret%zz@h:1",
                          "--replica-sync",
                          "redis://:s3cret@h:1/99999999999",
                          "--replica-synk=redis://:s3cret@h:1",
                          "--replica-sync-prefix",
                          "a b",
                          "--replica-sync-prefix",
                          ""});
  EXPECT_EQ(p.rc, 1);
  for (const char* expected :
       {"--replica-sync: \"redis://:***@h:0\" is not redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: "
        "\"h:0\" is not HOST:PORT with a port in [1, 65535]",
        "--replica-sync: \"redis://h\" is not",
        "--replica-sync: \"http://h:1\" is not redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: does not "
        "start with redis://",
        "the part before '@' is not :PASSWORD or USER:PASSWORD",
        "the database \"x\" is not an integer in [0, 2147483647]",
        "the password after ':' is empty",
        "a '%' in the user or password is not followed by two hex digits",
        "the database \"99999999999\" is not an integer",
        "unknown argument \"--replica-synk=redis://:***@h:1\"",
        "--replica-sync-prefix: \"a b\" is not printable ASCII without spaces",
        "--replica-sync-prefix: \"\" is not 1 to 128 characters"}) {
    EXPECT_NE(p.stderrText.find(expected), std::string::npos) << expected << "\n" << p.stderrText;
  }
  EXPECT_EQ(p.stderrText.find("s3cret"), std::string::npos) << p.stderrText;
}

TEST(GatewayOptionsTest, HelpShowsTheRedisUrlFormsAndThePrefix) {
  testing::internal::CaptureStdout();
  const Parsed help = parse({"--help"});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(help.rc, 2);
  EXPECT_NE(out.find("--replica-sync redis://[[USER]:PASSWORD@]HOST:PORT[/DB]"), std::string::npos)
      << out;
  EXPECT_NE(out.find("--replica-sync-prefix NAME"), std::string::npos) << out;
}

// --replica-mode share|reserve and --replica-lease-ms: the mode lands, the lease defaults to ten
// sync intervals (at least 100 ms), and bad values are reported with the flag, the value and what
// is allowed.
TEST(GatewayOptionsTest, ReplicaModeAndLease) {
  const Parsed share = parse({"--endpoint", "http://h:1", "--replica-sync", "redis://r:1"});
  EXPECT_EQ(share.rc, 0) << share.stderrText;
  EXPECT_FALSE(share.options.replicaReserve);
  EXPECT_EQ(share.options.replicaLeaseMs, 200);  // 10 x 20 ms
  const Parsed reserve =
      parse({"--endpoint", "http://h:1", "--replica-sync", "redis://r:1", "--replica-mode",
             "reserve", "--replica-sync-interval-ms", "50", "--replica-lease-ms", "400"});
  EXPECT_EQ(reserve.rc, 0) << reserve.stderrText;
  EXPECT_TRUE(reserve.options.replicaReserve);
  EXPECT_EQ(reserve.options.replicaLeaseMs, 400);
  const Parsed fast = parse({"--endpoint", "http://h:1", "--replica-sync-interval-ms", "5"});
  EXPECT_EQ(fast.options.replicaLeaseMs, 100);  // at least 100 ms

  const Parsed bad = parse(
      {"--endpoint", "http://h:1", "--replica-mode", "exclusive", "--replica-lease-ms", "700000"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.stderrText.find("--replica-mode: \"exclusive\" is not share or reserve"),
            std::string::npos)
      << bad.stderrText;
  EXPECT_NE(bad.stderrText.find("--replica-lease-ms: \"700000\" is over the largest allowed, "
                                "600000"),
            std::string::npos)
      << bad.stderrText;
  const Parsed short_lease = parse({"--endpoint", "http://h:1", "--replica-sync", "redis://r:1",
                                    "--replica-mode", "reserve", "--replica-lease-ms", "30"});
  EXPECT_EQ(short_lease.rc, 1);
  EXPECT_NE(short_lease.stderrText.find("--replica-lease-ms: 30 is below 50"), std::string::npos)
      << short_lease.stderrText;
  const Parsed no_redis = parse({"--endpoint", "http://h:1", "--replica-mode", "reserve"});
  EXPECT_EQ(no_redis.rc, 1);
  EXPECT_NE(no_redis.stderrText.find("--replica-mode reserve: needs --replica-sync"),
            std::string::npos)
      << no_redis.stderrText;
}

}  // namespace
}  // namespace holdback::gateway
