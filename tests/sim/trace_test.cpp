// Trace arrivals in the simulator (src/sim/trace.hpp, docs/guide/traces.md): the three readers,
// their errors with file and line, relative paths, startSeconds, timeScale, the seed stride, the
// too-large outcome, the minute windows and the built-in trace scenarios.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "holdback/config/document.hpp"
#include "sim/evaluate.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace holdback::sim {
namespace {

std::shared_ptr<const Trace> parsed(std::string_view text, TraceFormat f, std::string& error) {
  return parseTrace(text, "t.txt", f, error);
}

std::string traceError(std::string_view text, TraceFormat f) {
  std::string error;
  EXPECT_EQ(parsed(text, f, error), nullptr) << text;
  return error;
}

TEST(SimTraceTest, ReadsEachFormatRelativeToTheFirstRow) {
  std::string error;
  const auto azure = parsed(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:17:03.9799600,4808,10\n"
      "2023-11-16 18:17:04.0319600,3180,8\r\n"
      "\n"
      "2023-11-16 18:18:04.5,0,27\n",
      TraceFormat::kAzure, error);
  ASSERT_NE(azure, nullptr) << error;
  EXPECT_EQ(azure->timeNs, (std::vector<std::int64_t>{0, 52'000'000, 60'520'040'000}));
  EXPECT_EQ(azure->inputTokens, (std::vector<std::int64_t>{4808, 3180, 1}));  // 0 reads as 1
  EXPECT_EQ(azure->outputTokens, (std::vector<std::int64_t>{10, 8, 27}));
  // The loop period: the last row's time plus the mean gap.
  EXPECT_EQ(azure->periodNs, 60'520'040'000 + 60'520'040'000 / 2);

  const auto mooncake = parsed(
      R"({"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [1, 2]}
{"timestamp": 30535, "input_length": 6472, "output_length": 26, "other": "x"}
)",
      TraceFormat::kMooncake, error);
  ASSERT_NE(mooncake, nullptr) << error;
  EXPECT_EQ(mooncake->timeNs, (std::vector<std::int64_t>{0, 3'053'000'000}));
  EXPECT_EQ(mooncake->inputTokens, (std::vector<std::int64_t>{6955, 6472}));
  EXPECT_EQ(mooncake->outputTokens, (std::vector<std::int64_t>{52, 26}));

  const auto csv = parsed("seconds,input_tokens,output_tokens\n10,100,5\n10.5, 200 ,6\n",
                          TraceFormat::kCsv, error);
  ASSERT_NE(csv, nullptr) << error;
  EXPECT_EQ(csv->timeNs, (std::vector<std::int64_t>{0, 500'000'000}));
  EXPECT_EQ(csv->inputTokens, (std::vector<std::int64_t>{100, 200}));
  // Every row at one instant: no mean gap, the trace loops every second.
  const auto instant =
      parsed("seconds,input_tokens,output_tokens\n5,1,1\n5,1,1\n", TraceFormat::kCsv, error);
  ASSERT_NE(instant, nullptr) << error;
  EXPECT_EQ(instant->periodNs, 1'000'000'000);
}

// The Azure 2024 traces stamp every row with its UTC offset ("2024-05-10 00:00:00.009930+00:00");
// rows are compared in UTC.
TEST(SimTraceTest, ReadsAzureTimestampsWithAUtcOffset) {
  std::string error;
  const auto t = parsed(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2024-05-10 00:00:00.009930+00:00,2162,5\n"
      "2024-05-10 02:00:01.009930+02:00,1,1\n"  // 00:00:01.00993 UTC
      "2024-05-09T22:00:02.009930-02:00,2,2\n"  // the day before, west of UTC
      "2024-05-10T00:00:03Z,3,3\n"
      "2024-05-10 05:30:04.5+0530,4,4\n",
      TraceFormat::kAzure, error);
  ASSERT_NE(t, nullptr) << error;
  EXPECT_EQ(t->timeNs, (std::vector<std::int64_t>{0, 1'000'000'000, 2'000'000'000, 2'990'070'000,
                                                  4'490'070'000}));
  for (const char* bad :
       {"2024-05-10 00:00:00+24:00", "2024-05-10 00:00:00+05:60", "2024-05-10 00:00:00+5",
        "2024-05-10 00:00:00 +00:00", "2024-05-10 00:00:00+00:00x", "2024-05-10 00:00:00.+00:00",
        "2024-05-10 00:00:00Z0"}) {
    const std::string message =
        traceError(std::string("TIMESTAMP,ContextTokens,GeneratedTokens\n") + bad + ",1,1\n",
                   TraceFormat::kAzure);
    EXPECT_NE(message.find("is not a time like"), std::string::npos) << bad << ": " << message;
  }
}

// A header names the columns: they may come in any order, and other columns are ignored.
TEST(SimTraceTest, TheHeaderNamesTheColumns) {
  std::string error;
  const auto csv = parsed("input_tokens, Seconds ,model,output_tokens\n100,1.5,x,5\n200,2,y,6\n",
                          TraceFormat::kCsv, error);
  ASSERT_NE(csv, nullptr) << error;
  EXPECT_EQ(csv->timeNs, (std::vector<std::int64_t>{0, 500'000'000}));
  EXPECT_EQ(csv->inputTokens, (std::vector<std::int64_t>{100, 200}));
  EXPECT_EQ(csv->outputTokens, (std::vector<std::int64_t>{5, 6}));
  const auto azure =
      parsed("GeneratedTokens,TIMESTAMP,ContextTokens,Model\n7,2023-11-16 18:17:03,300,m\n",
             TraceFormat::kAzure, error);
  ASSERT_NE(azure, nullptr) << error;
  EXPECT_EQ(azure->inputTokens, (std::vector<std::int64_t>{300}));
  EXPECT_EQ(azure->outputTokens, (std::vector<std::int64_t>{7}));
  // A UTF-8 byte order mark before the header (a spreadsheet's export) is skipped.
  const auto bom =
      parsed("\xEF\xBB\xBFseconds,input_tokens,output_tokens\n1,2,3\n", TraceFormat::kCsv, error);
  ASSERT_NE(bom, nullptr) << error;
  EXPECT_EQ(bom->inputTokens, (std::vector<std::int64_t>{2}));
  // A header without one of the columns: named, with what is expected.
  std::string message = traceError("seconds,input_tokens,tokens_out\n1,2,3\n", TraceFormat::kCsv);
  EXPECT_EQ(message.rfind("t.txt:1: ", 0), 0u) << message;
  EXPECT_NE(message.find("no \"output_tokens\" column"), std::string::npos) << message;
  message = traceError("a,b,c\n1,2,3\n", TraceFormat::kCsv);
  EXPECT_NE(message.find("no \"seconds\" column"), std::string::npos) << message;
  message = traceError("seconds,input_tokens,seconds,output_tokens\n1,2,3,4\n", TraceFormat::kCsv);
  EXPECT_NE(message.find("\"seconds\" twice"), std::string::npos) << message;
  // A row has the header's number of fields.
  message = traceError("seconds,input_tokens,output_tokens,model\n1,2,3\n", TraceFormat::kCsv);
  EXPECT_NE(message.find("found 3 fields"), std::string::npos) << message;
  EXPECT_NE(message.find("expected 4"), std::string::npos) << message;
}

// A file is read in pieces: the result does not depend on where the pieces end.
TEST(SimTraceTest, ReadingInPiecesGivesTheSameTrace) {
  std::string text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n";
  for (int k = 0; k < 200; ++k) {
    text += "2024-05-10 00:" + std::string(k / 60 < 10 ? "0" : "") + std::to_string(k / 60) + ":" +
            (k % 60 < 10 ? "0" : "") + std::to_string(k % 60) + ".25+00:00," +
            std::to_string(k + 1) + "," + std::to_string(2 * k + 1) + "\r\n";
  }
  std::string error;
  const auto whole = parsed(text, TraceFormat::kAzure, error);
  ASSERT_NE(whole, nullptr) << error;
  ASSERT_EQ(whole->timeNs.size(), 200u);
  for (const std::size_t piece : {1u, 2u, 7u, 64u, 1000u}) {
    TraceReader reader("t.txt", TraceFormat::kAzure);
    for (std::size_t at = 0; at < text.size(); at += piece) {
      reader.feed(std::string_view(text).substr(at, piece));
    }
    const auto pieces = reader.finish(error);
    ASSERT_NE(pieces, nullptr) << piece << ": " << error;
    EXPECT_EQ(pieces->timeNs, whole->timeNs) << piece;
    EXPECT_EQ(pieces->inputTokens, whole->inputTokens) << piece;
    EXPECT_EQ(pieces->outputTokens, whole->outputTokens) << piece;
    EXPECT_EQ(pieces->periodNs, whole->periodNs) << piece;
  }
  // The last line needs no newline; an overlong line is refused with its number.
  const auto noNewline =
      parsed("seconds,input_tokens,output_tokens\n1,2,3", TraceFormat::kCsv, error);
  ASSERT_NE(noNewline, nullptr) << error;
  EXPECT_EQ(noNewline->inputTokens, (std::vector<std::int64_t>{2}));
  TraceReader longLine("t.txt", TraceFormat::kMooncake);
  longLine.feed("{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1}\n");
  const std::string chunk(1 << 16, ' ');
  for (std::size_t fed = 0; fed <= kMaxTraceLineBytes; fed += chunk.size()) longLine.feed(chunk);
  EXPECT_EQ(longLine.finish(error), nullptr);
  EXPECT_EQ(error.rfind("t.txt:2: ", 0), 0u) << error;
  EXPECT_NE(error.find("longer than"), std::string::npos) << error;
}

// Any bytes: a trace or an error naming the file, never a crash, and the same answer whether the
// bytes come at once or in pieces (random mutations of a valid file of each format).
TEST(SimTraceTest, AnyBytesGiveATraceOrAnErrorAndPiecesDoNotMatter) {
  const std::vector<std::pair<std::string, TraceFormat>> seeds{
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2162,5\n"
       "2024-05-10 00:00:01.5-01:30,7,8\n2023-11-16 18:17:03.9799600,1,1\n",
       TraceFormat::kAzure},
      {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 2}\n"
       "{\"timestamp\": 2.5, \"input_length\": 6, \"output_length\": 3, \"hash_ids\": [1]}\n",
       TraceFormat::kMooncake},
      {"seconds,model,input_tokens,output_tokens\n0,a,1,2\n0.5,b,3,4\n1e2,c,5,6\n",
       TraceFormat::kCsv},
  };
  const std::string alphabet = "0123456789,.:-+TZ \n\r\t{}\"e\xff";
  std::uint64_t state = 42;
  auto next = [&](std::uint64_t n) {  // xorshift: deterministic
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return n == 0 ? 0 : state % n;
  };
  int traces = 0, errors = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto& [seed, format] = seeds[static_cast<std::size_t>(round) % seeds.size()];
    std::string text = seed;
    for (std::uint64_t m = 1 + next(4); m > 0 && !text.empty(); --m) {
      const std::size_t at = next(text.size());
      switch (next(3)) {
        case 0:
          text[at] = alphabet[next(alphabet.size())];
          break;
        case 1:
          text.insert(at, 1, alphabet[next(alphabet.size())]);
          break;
        default:
          text.erase(at, 1 + next(8));
      }
    }
    std::string wholeError, pieceError;
    const auto whole = parseTrace(text, "t.txt", format, wholeError);
    TraceReader reader("t.txt", format);
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = 1 + next(17);
      reader.feed(std::string_view(text).substr(at, n));
      at += n;
    }
    const auto pieces = reader.finish(pieceError);
    ASSERT_EQ(whole == nullptr, pieces == nullptr) << text;
    if (whole == nullptr) {
      ++errors;
      EXPECT_EQ(wholeError.rfind("t.txt:", 0), 0u) << wholeError;
      EXPECT_EQ(pieceError, wholeError) << text;
      continue;
    }
    ++traces;
    EXPECT_EQ(pieces->timeNs, whole->timeNs) << text;
    EXPECT_EQ(pieces->inputTokens, whole->inputTokens) << text;
    ASSERT_FALSE(whole->timeNs.empty());
    EXPECT_EQ(whole->timeNs.front(), 0);
    EXPECT_TRUE(std::is_sorted(whole->timeNs.begin(), whole->timeNs.end())) << text;
    EXPECT_GT(whole->periodNs, 0);
    for (const std::int64_t v : whole->inputTokens) EXPECT_GE(v, 1);
  }
  // Both kinds of answer were exercised.
  EXPECT_GT(traces, 100);
  EXPECT_GT(errors, 100);
}

TEST(SimTraceTest, EveryErrorNamesTheFileAndLine) {
  struct Case {
    const char* text;
    TraceFormat format;
    const char* expected;  // in the message, after "t.txt:LINE: "
    int line;
  };
  const std::vector<Case> cases{
      {"seconds,input_tokens,output_tokens\n1,2\n", TraceFormat::kCsv, "found 2 fields", 2},
      {"seconds,input_tokens,output_tokens\n1,2,x\n", TraceFormat::kCsv, "\"x\" is not an integer",
       2},
      {"seconds,input_tokens,output_tokens\n1,-5,3\n", TraceFormat::kCsv, "-5 is negative", 2},
      {"seconds,input_tokens,output_tokens\n1,1,3\n\n0.5,1,3\n", TraceFormat::kCsv,
       "earlier than the previous row's", 4},
      {"seconds,input_tokens,output_tokens\nnan,1,3\n", TraceFormat::kCsv,
       "\"nan\" is not a finite number", 2},
      {"seconds,input_tokens,output_tokens\n1e300,1,3\n", TraceFormat::kCsv,
       "\"1e300\" is not a finite number", 2},
      {"seconds,input_tokens,output_tokens\n0,1,3\n1,99999999999,3\n", TraceFormat::kCsv,
       "99999999999 is too large", 3},
      {"seconds,input_tokens,output_tokens\n0,1,3\n2e7,1,3\n", TraceFormat::kCsv,
       "a trace spans at most", 3},
      {"1,2,3\n", TraceFormat::kCsv, "expected the header line", 1},
      {"seconds,input_tokens,output_tokens\n", TraceFormat::kCsv, "the trace has no requests", 1},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,1,1\nyesterday,1,1\n",
       TraceFormat::kAzure, "\"yesterday\" is not a time", 3},
      {"2023-11-16 18:17:03,1,1\n9999-12-31 23:59:59,1,1\n", TraceFormat::kAzure,
       "\"9999-12-31 23:59:59\" is not a time", 2},
      {"{\"timestamp\": 1, \"input_length\": 5}\n", TraceFormat::kMooncake,
       "no \"output_length\" key", 1},
      {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}\n[1]\n",
       TraceFormat::kMooncake, "not a JSON object", 2},
      {"{\"timestamp\": 1, \"input_length\": -1, \"output_length\": 1}\n", TraceFormat::kMooncake,
       "-1 is negative", 1},
  };
  for (const Case& c : cases) {
    const std::string error = traceError(c.text, c.format);
    EXPECT_EQ(error.rfind("t.txt:" + std::to_string(c.line) + ": ", 0), 0u) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
  std::string error;
  EXPECT_EQ(loadTrace("/no/such/trace.csv", TraceFormat::kCsv, error), nullptr);
  EXPECT_EQ(error, "/no/such/trace.csv: no such trace file");
}

std::string writeFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path.string();
}

// A trace of one request per second for 10 s, request k with k + 1 input tokens.
std::string tenRows() {
  std::string text = "seconds,input_tokens,output_tokens\n";
  for (int k = 0; k < 10; ++k) text += std::to_string(k) + "," + std::to_string(k + 1) + ",2\n";
  return text;
}

Result<Scenario> scenarioFile(const std::string& yaml, const std::string& baseDirectory) {
  auto doc = config::parseDocument(yaml);
  EXPECT_TRUE(doc.ok()) << doc.diagnostics().toString();
  return parseScenario(doc->json, baseDirectory);
}

// The arrivals of class 0 alone: (arrival time, input tokens).
std::vector<std::pair<double, std::int64_t>> arrivals(const Scenario& s) {
  Arm none;
  EXPECT_TRUE(findArm("none", none));
  const ArmResult r = runArm(s, none, {.collectSeries = true, .onlyClass = 0});
  std::vector<std::pair<double, std::int64_t>> out;
  for (const RequestRecord& rec : r.requests) out.emplace_back(rec.arrival, rec.inputTokens);
  return out;
}

TEST(SimTraceTest, RelativeFileStartTimeScaleAndSeedStride) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "holdback_trace_relative";
  writeFile(dir / "traces" / "ten.csv", tenRows());
  const std::string yaml = R"(durationSeconds: 5
drainSeconds: 1
classes:
  - name: t
    priority: 1
    arrival: {process: trace, file: traces/ten.csv, format: csv, startSeconds: START,
              timeScale: SCALE}
)";
  auto with = [&](const char* start, const char* scale) {
    std::string y = yaml;
    y.replace(y.find("START"), 5, start);
    y.replace(y.find("SCALE"), 5, scale);
    return y;
  };
  const auto plain = scenarioFile(with("0", "1"), dir.string());
  ASSERT_TRUE(plain.ok()) << plain.diagnostics().toString();
  EXPECT_EQ(plain.value().classes[0].arrival.traceFile, (dir / "traces" / "ten.csv").string());
  using Rows = std::vector<std::pair<double, std::int64_t>>;
  EXPECT_EQ(arrivals(plain.value()), (Rows{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  // startSeconds skips into the trace; the run's time starts there.
  const auto later = scenarioFile(with("3.5", "1"), dir.string());
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(arrivals(later.value()), (Rows{{0.5, 5}, {1.5, 6}, {2.5, 7}, {3.5, 8}, {4.5, 9}}));
  // timeScale 2: twice as fast, so 10 rows in 5 s.
  const auto fast = scenarioFile(with("0", "2"), dir.string());
  ASSERT_TRUE(fast.ok());
  const Rows twice = arrivals(fast.value());
  ASSERT_EQ(twice.size(), 10u);
  EXPECT_EQ(twice[3], (std::pair<double, std::int64_t>{1.5, 4}));
  // The trace loops: 10 rows, period 10 s (last row 9 s plus the mean gap of 1 s), so from 8 s
  // the run sees rows 8, 9, then 0, 1, 2.
  const auto looped = scenarioFile(with("8", "1"), dir.string());
  ASSERT_TRUE(looped.ok());
  EXPECT_EQ(arrivals(looped.value()), (Rows{{0, 9}, {1, 10}, {2, 1}, {3, 2}, {4, 3}}));
  // Seed k starts (k - 1) x 600 s later, modulo the period: seed 2 at 600 mod 10 = 0, seed 0
  // as seed 1.
  const Trace& trace = *plain.value().classes[0].arrival.trace;
  EXPECT_EQ(traceStartNs(trace, 0.0, 1), 0);
  EXPECT_EQ(traceStartNs(trace, 3.0, 1), 3'000'000'000);
  EXPECT_EQ(traceStartNs(trace, 3.0, 0), 3'000'000'000);
  EXPECT_EQ(traceStartNs(trace, 3.0, 2), 3'000'000'000);  // 600 s = 60 periods
  Trace odd = trace;
  odd.periodNs = 7'000'000'000;  // 600 mod 7 = 5
  EXPECT_EQ(traceStartNs(odd, 0.0, 2), 5'000'000'000);
  EXPECT_EQ(traceStartNs(odd, 0.0, 3), 3'000'000'000);  // 1200 mod 7 = 3
  EXPECT_EQ(
      traceStartNs(odd, 0.0, 1'000'000'000'000'001ULL),
      static_cast<std::int64_t>((600ull % 7) * (1'000'000'000'000'000ull % 7) % 7) * 1'000'000'000);
  Scenario seeded = plain.value();
  seeded.seed = 2;
  odd.file = "odd";
  seeded.classes[0].arrival.trace = std::make_shared<const Trace>(odd);
  EXPECT_EQ(arrivals(seeded).front(), (std::pair<double, std::int64_t>{0, 6}));  // row at 5 s

  // The same file read twice is one trace (the cache).
  const auto again = scenarioFile(with("0", "1"), dir.string());
  EXPECT_EQ(again.value().classes[0].arrival.trace.get(),
            plain.value().classes[0].arrival.trace.get());
}

TEST(SimTraceTest, ScenarioErrorsNameThePathAndTheTraceLine) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "holdback_trace_errors";
  writeFile(dir / "bad.csv", "seconds,input_tokens,output_tokens\n0,1,1\n1,-4,1\n");
  const auto bad = scenarioFile(R"(classes:
  - {name: t, priority: 1, arrival: {process: trace, file: bad.csv, format: csv}}
)",
                                dir.string());
  ASSERT_FALSE(bad.ok());
  const std::string text = bad.diagnostics().toString();
  EXPECT_NE(text.find("/classes/0/arrival/file"), std::string::npos) << text;
  EXPECT_NE(text.find((dir / "bad.csv").string() + ":3: input_tokens -4 is negative"),
            std::string::npos)
      << text;
  const auto missing = scenarioFile(R"(classes:
  - name: t
    priority: 1
    arrival: {process: trace, format: yaml, timeScale: 0, startSeconds: -1}
    inputTokens: {mean: 5}
)",
                                    dir.string());
  ASSERT_FALSE(missing.ok());
  const std::string m = missing.diagnostics().toString();
  for (const char* key :
       {"/classes/0/arrival/file", "/classes/0/arrival/format", "/classes/0/arrival/timeScale",
        "/classes/0/arrival/startSeconds", "/classes/0/inputTokens"}) {
    EXPECT_NE(m.find(key), std::string::npos) << key << "\n" << m;
  }
}

// A request whose input + output exceed the KV capacity is refused at once with its own outcome,
// with and without flow control, and counted; the others complete.
TEST(SimTraceTest, ARequestLargerThanEveryEndpointsKvIsRefusedNotQueued) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "holdback_trace_large";
  writeFile(dir / "large.csv",
            "seconds,input_tokens,output_tokens\n0,100,10\n1,5000,10\n2,100,10\n");
  auto s = scenarioFile(R"(durationSeconds: 5
drainSeconds: 5
pool: {endpoints: 2, slots: 4, kvCapacityTokens: 4096}
classes:
  - {name: t, priority: 1, arrival: {process: trace, file: large.csv, format: csv}}
)",
                        dir.string());
  ASSERT_TRUE(s.ok()) << s.diagnostics().toString();
  for (const char* name : {"none", "static-1.0", "recommended"}) {
    Arm arm;
    ASSERT_TRUE(findArm(name, arm));
    const ArmResult r = runArm(s.value(), arm, {.collectSeries = true});
    const ClassResult& c = r.classes[0];
    EXPECT_EQ(c.arrived, 5u) << name;  // rows 0, 1, 2, then (period 3 s) rows 0, 1 again
    EXPECT_EQ(c.tooLarge, 2u) << name;
    EXPECT_EQ(c.completed, 3u) << name;
    EXPECT_EQ(c.unfinished, 0u) << name;
    EXPECT_EQ(c.windows.back().tooLarge, 2u) << name;
    EXPECT_EQ(r.requests[1].outcome, "too-large") << name;
    EXPECT_TRUE(std::isnan(r.requests[1].admitted)) << name;  // never on a server
    EXPECT_TRUE(std::isnan(r.requests[1].dispatched)) << name;
  }
}

TEST(SimTraceTest, MinuteWindowsCoverTheMeasuredTimeAndTheWorstIsTheHighestP99) {
  Scenario s = defaultScenario();
  s.durationSeconds = 150.0;
  s.drainSeconds = 5.0;
  s.classes.resize(1);
  s.classes[0].arrival = {.process = ArrivalProcess::kPoisson, .rate = 5.0};
  Arm none;
  ASSERT_TRUE(findArm("none", none));
  const ArmResult r = runArm(s, none);
  const ClassResult& c = r.classes[0];
  ASSERT_EQ(c.minutes.size(), 3u);  // 60 + 60 + 30 s
  std::size_t arrived = 0;
  for (std::size_t m = 0; m < 3; ++m) {
    EXPECT_EQ(c.minutes[m].window, "minute-" + std::to_string(m));
    EXPECT_EQ(c.minutes[m].startSeconds, 60.0 * static_cast<double>(m));
    arrived += c.minutes[m].arrived;
  }
  EXPECT_EQ(c.minutes[2].seconds, 30.0);
  EXPECT_EQ(arrived, c.windows.back().arrived);  // every arrival in exactly one minute
  EXPECT_NEAR(c.minutes[2].completedPerSecond * 30.0 + c.minutes[0].completedPerSecond * 60.0 +
                  c.minutes[1].completedPerSecond * 60.0,
              c.windows.back().completedPerSecond * 150.0, 1e-6);

  ClassResult hand;
  EXPECT_FALSE(worstMinute(hand).has_value());
  hand.minutes.resize(4);
  hand.minutes[1].ttftMs.p99 = 80.0;
  hand.minutes[2].ttftMs.p99 = 95.0;
  hand.minutes[3].ttftMs.p99 = 95.0;
  EXPECT_EQ(worstMinute(hand), 2u);  // the highest, the first on ties; NaN minutes skipped

  // Over seeds: the worst minute of each seed, its index per seed.
  EvaluationOptions o{.seeds = {1, 2}, .arms = {none}, .threads = 1};
  s.durationSeconds = 130.0;
  const Evaluation e = evaluate(s, o);
  const ClassSummary& cs = e.reports[0].arms[0].classes[0];
  EXPECT_EQ(cs.minutes.size(), 3u);
  ASSERT_EQ(cs.worstMinuteIndex.size(), 2u);
  EXPECT_EQ(cs.worstMinute.window, "worstMinute");
  double highest = 0.0;
  for (const WindowSummary& m : cs.minutes) highest = std::max(highest, m.ttftP99.max);
  EXPECT_EQ(cs.worstMinute.ttftP99.max, highest);
}

TEST(SimTraceTest, BuiltInTraceScenariosLoadTheirTraces) {
  std::vector<std::string> names;
  for (const CatalogEntry& e : scenarioCatalog()) names.emplace_back(e.name);
  for (const char* name : {"azure-code", "azure-conv"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    Scenario s;
    std::string error;
    ASSERT_TRUE(findScenario(name, s, error)) << error;
    EXPECT_EQ(s.name, name);
    const ArrivalSpec& a = s.classes.front().arrival;
    ASSERT_EQ(a.process, ArrivalProcess::kTrace);
    ASSERT_NE(a.trace, nullptr);
    EXPECT_EQ(a.trace->timeNs.size(), std::string(name) == "azure-code" ? 8819u : 19366u);
    EXPECT_TRUE(scenarioSizeError(s).empty()) << scenarioSizeError(s);
    s.durationSeconds = 20.0;
    Arm none;
    ASSERT_TRUE(findArm("none", none));
    EXPECT_GT(runArm(s, none, {.onlyClass = 0}).classes.front().arrived, 10u) << name;
  }
  // A trace the data directory lacks: a clear error naming the file.
  ASSERT_EQ(setenv("HOLDBACK_DATA_DIR", "/no/such/dir", 1), 0);
  Scenario s;
  std::string error;
  EXPECT_FALSE(findScenario("azure-conv", s, error));
  unsetenv("HOLDBACK_DATA_DIR");
  EXPECT_NE(error.find("/no/such/dir/traces/azure-llm-2023-conv.csv: no such trace file"),
            std::string::npos)
      << error;
}

TEST(SimTraceTest, TheSizeEstimateCountsTheDensestStretch) {
  std::string error;
  // Four rows in the first second, then one at 9 s: period 9 + 9/4 s.
  const auto t = parseTrace(
      "seconds,input_tokens,output_tokens\n0,1,1\n0.2,1,1\n0.4,1,1\n"
      "0.6,1,1\n9,1,1\n",
      "t", TraceFormat::kCsv, error);
  ASSERT_NE(t, nullptr) << error;
  Scenario s = defaultScenario();
  s.classes.resize(1);
  s.classes[0].arrival = {.process = ArrivalProcess::kTrace, .trace = t};
  s.durationSeconds = 1.0;
  EXPECT_EQ(estimatedRequestsPerRun(s), 4.0);
  s.classes[0].arrival.timeScale = 100.0;  // 100 trace-seconds: 8 whole loops (90 s) + 10 s
  EXPECT_EQ(estimatedRequestsPerRun(s), 8 * 5 + 5.0);
}

}  // namespace
}  // namespace holdback::sim
