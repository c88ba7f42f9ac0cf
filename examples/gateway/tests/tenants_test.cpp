// The key file (--api-keys, tenants.cpp): what a valid file gives, every problem of a bad one
// reported at once with its path and line and without the keys' values, the bounds, the bearer
// header, the ceiling, the directory's reload and counters, and the SHA-256 the lookup hashes
// with.
#include "tenants.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace holdback::gateway {
namespace {

std::string hex(const Sha256Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const std::uint8_t b : d) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// Keys of the tests: 16+ characters of the allowed set.
const std::string kBatchKey = "sk-batch-0123456789abcdef";
const std::string kBatchKey2 = "sk-batch-rotated-0123456789";
const std::string kChatKey = "sk-chat+/=~_.-0123456789";

const std::string kValidYaml = R"(# two tenants
tenants:
  - name: acme-batch
    maxObjective: batch
    keys: [")" + kBatchKey + R"(", ")" +
                               kBatchKey2 + R"("]
  - name: acme.chat_1
    maxPriority: 10
    fairnessId: acme shared flow
    keys:
      - )" + kChatKey + "\n";

std::string errorsOf(std::string_view text,
                     const ObjectiveTable& objectives = ObjectiveTable::builtin()) {
  const auto r = TenantTable::parse(text, objectives);
  EXPECT_FALSE(r.ok()) << text;
  return r.diagnostics().toString();
}

TEST(Sha256Test, KnownDigests) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths around the padding's block boundaries (Python's hashlib for the expected values).
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
      {200, "c2a908d98f5df987ade41b5fce213067efbcc21ef2240212a41e54b5e7c28ae5"},
      {1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"}};
  for (const auto& [n, expected] : cases) {
    EXPECT_EQ(hex(sha256(std::string(n, 'a'))), expected) << n << " bytes";
  }
}

TEST(TenantTableTest, ValidYamlGivesTenantsCeilingsFlowsAndKeys) {
  const auto r = TenantTable::parse(kValidYaml, ObjectiveTable::builtin());
  ASSERT_TRUE(r.ok()) << r.diagnostics().toString();
  const TenantTable& t = r.value();
  ASSERT_EQ(t.tenants().size(), 2u);
  EXPECT_EQ(t.keys(), 3u);
  const Tenant* batch = t.find(kBatchKey);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->name, "acme-batch");
  EXPECT_EQ(batch->maxPriority, -1);           // the objective's priority
  EXPECT_EQ(batch->fairnessId, "acme-batch");  // the name, without fairnessId
  EXPECT_EQ(t.find(kBatchKey2), batch);        // two keys, one tenant
  const Tenant* chat = t.find(kChatKey);
  ASSERT_NE(chat, nullptr);
  EXPECT_EQ(chat->name, "acme.chat_1");
  EXPECT_EQ(chat->maxPriority, 10);
  EXPECT_EQ(chat->fairnessId, "acme shared flow");
  // Anything else is no key: a prefix, one more character, another case, empty, huge.
  EXPECT_EQ(t.find(kBatchKey.substr(0, kBatchKey.size() - 1)), nullptr);
  EXPECT_EQ(t.find(kBatchKey + "0"), nullptr);
  EXPECT_EQ(t.find("SK-BATCH-0123456789ABCDEF"), nullptr);
  EXPECT_EQ(t.find(""), nullptr);
  EXPECT_EQ(t.find(std::string(100000, 'a')), nullptr);
}

TEST(TenantTableTest, JsonAndObjectivesFromTheCommandLine) {
  ObjectiveTable objectives = ObjectiveTable::builtin();
  ASSERT_TRUE(objectives.set("standard=5"));
  const auto r = TenantTable::parse(R"({"tenants": [{"name": "t", "maxObjective": "standard",
      "keys": ["0123456789abcdef"]}, {"name": "low", "maxPriority": -2147483648,
      "keys": ["fedcba9876543210"]}]})",
                                    objectives);
  ASSERT_TRUE(r.ok()) << r.diagnostics().toString();
  ASSERT_NE(r->find("0123456789abcdef"), nullptr);
  EXPECT_EQ(r->find("0123456789abcdef")->maxPriority, 5);
  EXPECT_EQ(r->find("fedcba9876543210")->maxPriority, INT32_MIN);
}

TEST(TenantTableTest, EveryProblemIsReportedAtOnceWithItsLineAndNoKeyValue) {
  const std::string text = R"(tenants:
  - name: "bad name!"
    maxObjective: batch
    keys: [short-key-1]
  - name: ok
    maxObjective: premium
    keys: ["0123456789abcdef"]
  - name: both
    maxObjective: batch
    maxPriority: 3
    keys: ["0123456789abcdef", 12345678901234567890123]
  - name: none
    keys: []
    color: blue
  - name: ok
    maxPriority: 99999999999
    fairnessId: ""
    keys: ["has space in it 0123"]
  - maxPriority: 1
    keys: ["abcdefghijklmnopq"]
extra: 1
)";
  const std::string e = errorsOf(text);
  const char* expected[] = {
      "/tenants/0/name (line 2, column 11): \"bad name!\" is not a tenant name: 1 to 64 of",
      "/tenants/0/keys/0 (line 4, column 12): a key of 11 characters (not shown); a key is 16 to "
      "256",
      "/tenants/1/maxObjective (line 6, column 19): \"premium\" is not an objective; allowed: "
      "batch (-1), interactive (10)",
      "/tenants/2/maxPriority (line 10, column 18): give maxObjective or maxPriority, not both",
      "/tenants/2/keys/0 (line 11, column 12): the same key as /tenants/1/keys/0 (not shown)",
      "/tenants/2/keys/1 (line 11, column 32): found a number; a key is a string",
      "/tenants/3 (line 12, column 5): needs a ceiling: maxObjective (one of batch (-1), "
      "interactive (10)) or maxPriority",
      "/tenants/3/keys (line 13, column 11): is empty",
      "/tenants/3/color (line 14, column 12): unknown key \"color\"",
      "/tenants/4/name (line 15, column 11): \"ok\" is also the name of /tenants/1",
      "/tenants/4/maxPriority (line 16, column 18):",
      "/tenants/4/fairnessId (line 17, column 17): \"\" is not a fairness id",
      "/tenants/4/keys/0 (line 18, column 12): a key of 20 characters with a character outside",
      "/tenants/5/name (line 19, column 5): is required",
      "/extra (line 21, column 8): unknown key \"extra\"; allowed keys: tenants",
  };
  for (const char* s : expected) {
    EXPECT_NE(e.find(s), std::string::npos) << "missing: " << s << "\n" << e;
  }
  // The keys' values are never printed (the log is not the place for them).
  for (const char* secret :
       {"short-key-1", "0123456789abcdef", "12345678901234567890123", "has space in it"}) {
    EXPECT_EQ(e.find(secret), std::string::npos) << secret << "\n" << e;
  }
}

TEST(TenantTableTest, ShapeErrors) {
  EXPECT_NE(errorsOf("").find("expected an object with the key \"tenants\""), std::string::npos);
  EXPECT_NE(errorsOf("tenants: 3")
                .find("/tenants (line 1, column 10): 3 is a number; expected a "
                      "list of tenants"),
            std::string::npos)
      << errorsOf("tenants: 3");
  EXPECT_NE(errorsOf("tenants: []").find("/tenants (line 1, column 10): is empty"),
            std::string::npos);
  EXPECT_NE(errorsOf("{}").find("/tenants: is required"), std::string::npos);
  EXPECT_NE(errorsOf("tenants: [3]").find("/tenants/0 (line 1, column 11): "), std::string::npos);
  EXPECT_NE(errorsOf("tenants: [{name: a, maxPriority: 1, keys: 0123456789abcdefgh}]")
                .find("/tenants/0/keys (line 1, column 43): found a string; expected a list of "
                      "keys"),
            std::string::npos);
  // A file written as a map of keys: the unknown key is reported without its value.
  const std::string e = errorsOf("sk-live-0123456789abcdef: acme\n");
  EXPECT_NE(e.find("an unknown key of 24 characters (not shown"), std::string::npos) << e;
  EXPECT_EQ(e.find("sk-live"), std::string::npos) << e;
  // YAML syntax errors come from the document reader, with their position.
  EXPECT_NE(errorsOf("tenants: [\n").find("line"), std::string::npos);
  // Duplicate YAML keys are errors.
  EXPECT_NE(errorsOf("tenants: []\ntenants: []\n").find("duplicate"), std::string::npos)
      << errorsOf("tenants: []\ntenants: []\n");
}

TEST(TenantTableTest, Bounds) {
  // More tenants than allowed: one error, not one per tenant.
  std::string many = "{\"tenants\": [";
  for (std::size_t i = 0; i <= TenantTable::kMaxTenants; ++i) {
    many += std::string(i ? "," : "") + "{\"name\": \"t" + std::to_string(i) +
            "\", \"maxPriority\": 0, \"keys\": [\"key-" + std::to_string(1000000 + i) +
            "-abcdefgh\"]}";
  }
  many += "]}";
  const std::string e = errorsOf(many);
  EXPECT_NE(e.find("/tenants: 10001 tenants; at most 10000 are allowed"), std::string::npos) << e;
  // More keys than allowed, over fewer tenants.
  std::string keys = "{\"tenants\": [{\"name\": \"a\", \"maxPriority\": 0, \"keys\": [";
  for (std::size_t i = 0; i <= TenantTable::kMaxKeys; ++i) {
    keys += std::string(i ? "," : "") + "\"key-" + std::to_string(1000000 + i) + "-abcdefgh\"";
  }
  keys += "]}]}";
  const std::string k = errorsOf(keys);
  EXPECT_NE(k.find("/tenants/0/keys/10000: more than 10000 keys in the file"), std::string::npos)
      << k.substr(0, 500);
  // Key length: 256 is the longest key, 257 too long; 16 the shortest.
  const auto withKey = [](const std::string& key) {
    return "{\"tenants\": [{\"name\": \"a\", \"maxPriority\": 0, \"keys\": [\"" + key + "\"]}]}";
  };
  EXPECT_TRUE(TenantTable::parse(withKey(std::string(256, 'k')), ObjectiveTable::builtin()).ok());
  EXPECT_TRUE(TenantTable::parse(withKey(std::string(16, 'k')), ObjectiveTable::builtin()).ok());
  EXPECT_NE(errorsOf(withKey(std::string(257, 'k'))).find("a key of 257 characters"),
            std::string::npos);
  EXPECT_NE(errorsOf(withKey(std::string(15, 'k'))).find("a key of 15 characters"),
            std::string::npos);
  // Names: 64 characters at most.
  EXPECT_NE(errorsOf("tenants: [{name: " + std::string(65, 'n') +
                     ", maxPriority: 0, keys: [0123456789abcdef]}]")
                .find("is not a tenant name"),
            std::string::npos);
}

TEST(TenantTableTest, LoadReadsAFileWithinItsBound) {
  char dir_template[] = "/tmp/holdback-tenants-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string good = dir + "/keys.yaml";
  std::ofstream(good) << kValidYaml;
  const auto r = TenantTable::load(good, ObjectiveTable::builtin());
  ASSERT_TRUE(r.ok()) << r.diagnostics().toString();
  EXPECT_EQ(r->keys(), 3u);
  const std::string big = dir + "/big.yaml";
  {
    std::ofstream out(big);
    out << kValidYaml << "# " << std::string(TenantTable::kMaxFileBytes, 'x') << "\n";
  }
  const auto b = TenantTable::load(big, ObjectiveTable::builtin());
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.diagnostics().toString().find("larger than 1048576 bytes"), std::string::npos)
      << b.diagnostics().toString();
  const auto missing = TenantTable::load(dir + "/absent.yaml", ObjectiveTable::builtin());
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.diagnostics().toString().find("cannot read " + dir + "/absent.yaml"),
            std::string::npos);
  std::remove(good.c_str());
  std::remove(big.c_str());
  rmdir(dir.c_str());
}

TEST(BearerTokenTest, SchemeAndToken) {
  EXPECT_EQ(bearerToken("Bearer abc"), "abc");
  EXPECT_EQ(bearerToken("bearer abc"), "abc");
  EXPECT_EQ(bearerToken("BEARER   abc  "), "abc");
  EXPECT_EQ(bearerToken("Bearer"), std::nullopt);
  EXPECT_EQ(bearerToken("Bearer "), std::nullopt);
  EXPECT_EQ(bearerToken("Bearerabc"), std::nullopt);
  EXPECT_EQ(bearerToken("Basic abc"), std::nullopt);
  EXPECT_EQ(bearerToken("Bearer a b"), std::nullopt);
  EXPECT_EQ(bearerToken("Bearer a,b"), std::nullopt);
  EXPECT_EQ(bearerToken(""), std::nullopt);
}

TEST(TenantClaimTest, ClaimsAboveTheCeilingAreLowered) {
  Tenant batch;
  batch.maxPriority = -1;
  EXPECT_EQ(claimFor(batch, 10, true).priority, -1);
  EXPECT_TRUE(claimFor(batch, 10, true).clamped);
  // No objective named (priority 0): lowered, not counted as a claim.
  EXPECT_EQ(claimFor(batch, 0, false).priority, -1);
  EXPECT_FALSE(claimFor(batch, 0, false).clamped);
  EXPECT_EQ(claimFor(batch, -1, true).priority, -1);
  EXPECT_FALSE(claimFor(batch, -1, true).clamped);
  EXPECT_EQ(claimFor(batch, -5, true).priority, -5);  // lower claims stand
  Tenant chat;
  chat.maxPriority = 10;
  EXPECT_EQ(claimFor(chat, 10, true).priority, 10);
  EXPECT_FALSE(claimFor(chat, 10, true).clamped);
  EXPECT_EQ(claimFor(chat, 0, false).priority, 0);
}

TEST(TenantDirectoryTest, AuthenticatesAndKeepsCountersAcrossReloads) {
  TenantDirectory dir;
  dir.enable();
  auto first = TenantTable::parse(kValidYaml, ObjectiveTable::builtin());
  ASSERT_TRUE(first.ok());
  dir.install(std::move(first).value());
  const std::string bearer = "Bearer " + kBatchKey;
  auto a = dir.authenticate({bearer});
  ASSERT_EQ(a.check, TenantDirectory::Check::kOk);
  EXPECT_EQ(a.tenant->name, "acme-batch");
  a.tenant->stats->clamped.fetch_add(1);
  EXPECT_EQ(dir.authenticate({}).check, TenantDirectory::Check::kMissing);
  EXPECT_EQ(dir.authenticate({"Bearer sk-nobody-0123456789abc"}).check,
            TenantDirectory::Check::kInvalid);
  EXPECT_EQ(dir.authenticate({"Basic " + kBatchKey}).check, TenantDirectory::Check::kInvalid);
  // Two Authorization headers, even both valid: refused.
  EXPECT_EQ(dir.authenticate({bearer, bearer}).check, TenantDirectory::Check::kInvalid);
  EXPECT_EQ(dir.missing.load(), 1u);
  EXPECT_EQ(dir.invalid.load(), 3u);

  // The reload: acme-batch keeps its counters under a new key, acme.chat_1 is gone, new-one new.
  auto second = TenantTable::parse(R"(tenants:
  - {name: acme-batch, maxObjective: interactive, keys: [sk-new-batch-key-0123]}
  - {name: new-one, maxPriority: 0, keys: [sk-new-one-key-01234]}
)",
                                   ObjectiveTable::builtin());
  ASSERT_TRUE(second.ok()) << second.diagnostics().toString();
  dir.install(std::move(second).value());
  EXPECT_EQ(dir.authenticate({bearer}).check, TenantDirectory::Check::kInvalid);  // old key gone
  const auto b = dir.authenticate({"Bearer sk-new-batch-key-0123"});
  ASSERT_EQ(b.check, TenantDirectory::Check::kOk);
  EXPECT_EQ(b.tenant->maxPriority, 10);
  // A tenant handed out before the reload still reads its (old) table.
  EXPECT_EQ(a.tenant->maxPriority, -1);
  const auto rows = dir.rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].tenant, "acme-batch");
  EXPECT_EQ(rows[0].requests, 2u);
  EXPECT_EQ(rows[0].clamped, 1u);
  EXPECT_EQ(rows[1].tenant, "new-one");
  EXPECT_EQ(rows[1].requests, 0u);
}

// I/O threads authenticate while the main thread installs reloaded tables (SIGHUP): every
// authentication sees one whole table, old or new (run under TSan by the sanitizer builds).
TEST(TenantDirectoryTest, AuthenticationDuringReloadsSeesOneWholeTable) {
  const auto table = [](Priority ceiling) {
    auto r = TenantTable::parse("tenants: [{name: t, maxPriority: " + std::to_string(ceiling) +
                                    ", keys: [sk-concurrent-0123456789]}]",
                                ObjectiveTable::builtin());
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  };
  TenantDirectory dir;
  dir.enable();
  dir.install(table(0));
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  std::atomic<int> bad{0};
  std::atomic<std::uint64_t> ok{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      bool first = true;
      while (first || !stop.load()) {
        const auto a = dir.authenticate({"Bearer sk-concurrent-0123456789"});
        if (a.check != TenantDirectory::Check::kOk || a.tenant->name != "t" ||
            (a.tenant->maxPriority != 0 && a.tenant->maxPriority != 5)) {
          bad.fetch_add(1);
        } else {
          ok.fetch_add(1);
        }
        if (first) started.fetch_add(1);
        first = false;
      }
    });
  }
  while (started.load() < 2) std::this_thread::yield();
  for (int i = 0; i < 200; ++i) dir.install(table(i % 2 == 0 ? 5 : 0));
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  const auto rows = dir.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].requests, ok.load());  // one counter for "t" through every reload
}

}  // namespace
}  // namespace holdback::gateway
