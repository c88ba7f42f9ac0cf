// json_scan::scan against nlohmann::json::sax_parse, the parser it replaced on the request path:
// the same verdict and the same events, in the same order, for well-formed, malformed and
// randomly mutated texts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "json_scan.hpp"
#include "tests/json_scan_reference.hpp"

namespace holdback::gateway {
namespace {

using json_scan_reference::JsonScanRecorder;
using json_scan_reference::JsonScanReference;

// Same verdict; on success the same events (on failure the events up to the failure may differ
// only in the token nlohmann had already read, so only verdicts are compared).
void jsonScanExpectSame(std::string_view text, std::size_t limit = 1000) {
  JsonScanRecorder mine;
  mine.log.limit = limit;
  JsonScanReference ref;
  ref.log.limit = limit;
  const bool got = json_scan::scan(text, mine);
  const bool want = nlohmann::json::sax_parse(text.begin(), text.end(), &ref);
  ASSERT_EQ(got, want) << "text: " << ::testing::PrintToString(std::string(text));
  if (want) {
    ASSERT_EQ(mine.log.events, ref.log.events)
        << "text: " << ::testing::PrintToString(std::string(text));
  }
}

const std::vector<std::string>& jsonScanCorpus() {
  static const std::vector<std::string> corpus = {
      R"({"model":"m","prompt":"hi","max_tokens":4})",
      R"({"messages":[{"role":"user","content":"a\nb \"c\" \\ \/ \b\f\r\t"}],"stream":true})",
      R"( { "a" : [ 1 , -2 , 3.5 , -0 , 0 , 1e3 , 2E-2 , -0.0e+1 , true , false , null ] } )",
      "\xEF\xBB\xBF{\"bom\":1}",
      "\xEF\xBB{}",
      "\xEF{}",
      " \xEF\xBB\xBF{}",
      R"({"u":"\u0041\u00e9\u20ac\ud83d\ude00\u0000x"})",
      R"({"u":"\ud83d"})",
      R"({"u":"\ud83dx"})",
      R"({"u":"\ud83d\u0041"})",
      R"({"u":"\ude00"})",
      R"({"u":"\u12"})",
      R"({"u":"\u12G4"})",
      R"({"u":"\q"})",
      "{\"c\":\"\x01\"}",
      "{\"c\":\"\x7f\"}",
      "{\"utf8\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
      "{\"bad\":\"\xc0\xaf\"}",
      "{\"bad\":\"\xed\xa0\x80\"}",
      "{\"bad\":\"\xf4\x90\x80\x80\"}",
      "{\"bad\":\"\xe0\x80\xaf\"}",
      "{\"bad\":\"\xc3\"}",
      "{\"bad\":\"\xf0\x9f\x98\"}",
      R"({"n":18446744073709551615})",
      R"({"n":18446744073709551616})",
      R"({"n":-9223372036854775808})",
      R"({"n":-9223372036854775809})",
      R"({"n":1e308})",
      R"({"n":1e309})",
      R"({"n":-1e400})",
      R"({"n":1e-400})",
      "{\"n\":1" + std::string(400, '0') + "}",
      R"({"n":01})",
      R"({"n":-})",
      R"({"n":1.})",
      R"({"n":.5})",
      R"({"n":+1})",
      R"({"n":1e})",
      R"({"n":1e+})",
      R"({"n":0x10})",
      R"({"n":Infinity})",
      R"({"n":NaN})",
      R"({"a":tru})",
      R"({"a":truex})",
      R"({"a":nul})",
      R"({"a":fals})",
      R"({"a":1,})",
      R"([1,])",
      R"([,1])",
      R"({,})",
      R"({"a" 1})",
      R"({"a":1 "b":2})",
      R"({1:2})",
      R"({'a':1})",
      R"({"a":1}})",
      R"({"a":1}])",
      R"([1}})",
      "{\"a\":1}\0garbage",
      std::string("{\"a\":1} \0 garbage", 17),
      std::string("{\"a\":\0}", 7),
      std::string("\0", 1),
      "{\"a\":1}\n",
      "{\"a\":1} x",
      "{\"a\":1} {}",
      "",
      " ",
      "42",
      "-1",
      "\"s\"",
      "true",
      "null",
      "[]",
      "{}",
      "[[[]]]",
      R"({"a":{"b":{"c":[{"d":[]}]}}})",
      "\t\r\n{\t\r\n}\t\r\n",
      "\f{}",
      "{\"a\":1}\v",
      "/* c */ {}",
      R"({"a":"unterminated)",
      R"({"a":"x\)",
      "[\"a\\",
  };
  return corpus;
}

TEST(JsonScan, AcceptsAndReportsWhatNlohmannSaxParseDoes) {
  for (const std::string& text : jsonScanCorpus()) jsonScanExpectSame(text);
}

TEST(JsonScan, AHandlerRefusingAStartStopsTheScan) {
  const std::string nested = "{\"a\":[[[[1]]]],\"b\":{\"c\":{}}}";
  for (std::size_t limit = 0; limit <= 6; ++limit) jsonScanExpectSame(nested, limit);
}

TEST(JsonScan, RandomMutationsGetNlohmannsVerdict) {
  std::mt19937 rng(20261207);
  const std::string alphabet =
      "{}[],:\"\\/ \t\n0123456789-+.eEtrufalsn\x01\x80\xc3\xa9\xef\xbb\xbfu";
  const std::vector<std::string>& corpus = jsonScanCorpus();
  for (int i = 0; i < 20000; ++i) {
    std::string text = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 1:
          if (at < text.size()) text.erase(at, 1);
          break;
        default:
          if (at < text.size()) text[at] = c;
      }
    }
    jsonScanExpectSame(text);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace holdback::gateway
