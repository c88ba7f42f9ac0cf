// The trace side of the scenario reader and the built-in trace scenarios
// (src/sim/trace_scenarios.hpp; docs/guide/traces.md).
#include "sim/trace_scenarios.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

void readTraceArrival(config::ParamReader& r, const std::string& baseDirectory, ArrivalSpec& out) {
  if (auto f = r.oneOf("format", {"azure", "mooncake", "csv"})) {
    out.traceFormat = *f == "azure"      ? TraceFormat::kAzure
                      : *f == "mooncake" ? TraceFormat::kMooncake
                                         : TraceFormat::kCsv;
  }
  if (auto v = r.number("startSeconds")) {
    if (!(*v >= 0.0 && *v <= kMaxTraceSpanSeconds)) {
      r.error("startSeconds",
              formatNumber(*v) + " must be in [0, " + formatNumber(kMaxTraceSpanSeconds) + "]");
    } else {
      out.startSeconds = *v;
    }
  }
  if (auto v = r.number("timeScale")) {
    if (!(*v >= 0.001 && *v <= 1000.0)) {
      r.error("timeScale", formatNumber(*v) + " must be in [0.001, 1000] (2 = twice as fast)");
    } else {
      out.timeScale = *v;
    }
  }
  const std::optional<std::string> file = r.string("file");
  if (!file || file->empty()) {
    if (!file) r.error("file", "a trace class needs the trace's file (arrival.file)");
    if (file) r.error("file", "must be a non-empty path");
    return;
  }
  const std::filesystem::path given(*file);
  out.traceFile = given.is_relative() && !baseDirectory.empty()
                      ? (std::filesystem::path(baseDirectory) / given).lexically_normal().string()
                      : given.string();
  std::string error;
  out.trace = loadTrace(out.traceFile, out.traceFormat, error);
  if (!out.trace) r.error("file", error);
}

double traceRequests(const ArrivalSpec& a, double durationSeconds) {
  if (!a.trace) return 0.0;
  const Trace& t = *a.trace;
  const auto n = static_cast<double>(t.timeNs.size());
  const double window = durationSeconds * a.timeScale * 1e9;  // trace time of one run
  const double loops = std::floor(window / static_cast<double>(t.periodNs));
  const auto rest = static_cast<std::int64_t>(window - loops * static_cast<double>(t.periodNs));
  // The densest stretch of `rest` ns, over the trace and its next loop (two pointers).
  const std::size_t rows = t.timeNs.size();
  auto at = [&](std::size_t i) { return i < rows ? t.timeNs[i] : t.timeNs[i - rows] + t.periodNs; };
  std::size_t most = 0;
  for (std::size_t lo = 0, hi = 0; lo < rows; ++lo) {
    hi = std::max(hi, lo);
    while (hi < 2 * rows && at(hi) - at(lo) < rest) ++hi;
    most = std::max(most, hi - lo);
  }
  return loops * n + static_cast<double>(most);
}

std::string builtinTraceDirectory() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("HOLDBACK_DATA_DIR"); dir != nullptr && *dir != '\0') {
    return (fs::path(dir) / "traces").string();
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed =
        (exe.parent_path() / HOLDBACK_SIM_INSTALLED_DATA_FROM_BIN / "traces").lexically_normal();
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return (fs::path(HOLDBACK_SIM_SOURCE_DATA_DIR) / "traces").string();
}

std::vector<CatalogEntry> traceCatalog() {
  return {{"azure-code",
           "the Azure 2023 code-completion trace (bursty: 3 to 327 arrivals per 10 s, 2k-token "
           "prompts, 28-token outputs) as the interactive class, a batch backlog of 200 behind "
           "it, 600 s of the trace per seed (seeds start 600 s apart), on 2 x 8 slots: the "
           "trace alone fills half of them at its p99 (docs/guide/traces.md)"},
          {"azure-conv",
           "the Azure 2023 conversation trace (5.5 requests/s, 1.2k-token prompts, 211-token "
           "outputs) the same way: the trace alone keeps the 2 x 8 slots 47 % busy on average"}};
}

namespace {

// The trace as the interactive class (TTL 30 s) over a batch backlog of 200, for 600 s.
Scenario traceScenario(std::string_view name, const char* file) {
  Scenario s;
  s.name = std::string(name);
  // The default server (PoolSpec's timings, 32768 KV tokens), 2 x 8 slots: the conversation
  // trace alone keeps it 47 % busy on average, the code trace (bursts 12x its mean) 50 % at its
  // p99 (docs/guide/traces.md).
  s.pool.endpoints = 2;
  s.pool.slots = 8;
  s.durationSeconds = 600.0;
  s.drainSeconds = 30.0;
  s.classes.clear();
  TrafficClass interactive{.name = "interactive", .priority = 100, .ttlSeconds = 30.0};
  interactive.arrival.process = ArrivalProcess::kTrace;
  interactive.arrival.traceFile = (std::filesystem::path(builtinTraceDirectory()) / file).string();
  interactive.arrival.traceFormat = TraceFormat::kAzure;
  s.classes.push_back(std::move(interactive));
  s.classes.push_back(
      {.name = "batch",
       .priority = -1,
       .arrival = {.process = ArrivalProcess::kBacklog, .backlog = 200, .rampSeconds = 10.0},
       .inputTokens = {.distribution = LengthDistribution::kUniform, .min = 256, .max = 2048},
       .outputTokens = {.distribution = LengthDistribution::kUniform, .min = 64, .max = 512},
       .ttlSeconds = 0.0});
  return s;
}

}  // namespace

std::optional<bool> findTraceScenario(std::string_view name, Scenario& out, std::string& error) {
  Scenario s;
  if (name == "azure-code") {
    s = traceScenario(name, "azure-llm-2023-code.csv");
  } else if (name == "azure-conv") {
    s = traceScenario(name, "azure-llm-2023-conv.csv");
  } else {
    return std::nullopt;
  }
  ArrivalSpec& a = s.classes.front().arrival;
  a.trace = loadTrace(a.traceFile, a.traceFormat, error);
  if (!a.trace) {
    error = "the built-in scenario " + std::string(name) + " needs its trace: " + error +
            " (set HOLDBACK_DATA_DIR to the directory holding traces/)";
    return false;
  }
  out = std::move(s);
  return true;
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
