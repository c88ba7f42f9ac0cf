// Recorded traces as a traffic class's arrivals (arrival.process "trace", docs/guide/traces.md):
// the trace readers (Azure CSV, Mooncake JSON lines, plain CSV), a cache so that a run over many
// seeds, arms and detectors reads each file once, and the cursor that replays a trace from a start
// offset at a time scale.
//
// Thread safety: loadTrace() may be called from any thread (its cache takes a lock); a Trace is
// immutable once loaded and shared read-only; a TraceCursor is thread-compatible (one per run).
#pragma once

#include "holdback/abi.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

enum class TraceFormat { kAzure, kMooncake, kCsv };
// "azure", "mooncake", "csv".
[[nodiscard]] std::string_view toString(TraceFormat format) noexcept;

// The bounds every trace file is held to (the published week-long Azure 2024 traces have 16.8
// and 27.3 million rows; the code trace is 0.7 GB).
inline constexpr std::uint64_t kMaxTraceFileBytes = 2ull << 30;  // 2 GiB
inline constexpr std::size_t kMaxTraceRows = 32'000'000;
inline constexpr std::size_t kMaxTraceLineBytes = 1u << 20;  // 1 MiB
inline constexpr std::int64_t kMaxTraceTokens = 10'000'000;  // per request, input or output
inline constexpr double kMaxTraceSpanSeconds = 1e7;          // last row - first row (115 days)
// Seeds shift a trace class's start by this many seconds each (modulo the trace's period):
// seed 1 starts at startSeconds, seed 2 600 s later, and so on.
inline constexpr double kTraceSeedStrideSeconds = 600.0;

// One trace file's requests, times relative to its first row, in nanoseconds, non-decreasing.
struct Trace {
  std::string file;  // the path it was read from
  TraceFormat format = TraceFormat::kAzure;
  std::vector<std::int64_t> timeNs;
  std::vector<std::int64_t> inputTokens;   // >= 1 (a 0 in the file reads as 1)
  std::vector<std::int64_t> outputTokens;  // >= 1
  // The trace loops with this period: the last row's time plus the mean gap between rows; 1 s
  // when every row has the same time.
  std::int64_t periodNs = 1;
};

// Reads one trace file from its bytes, fed in pieces split anywhere (loadTrace feeds the file in
// blocks, parseTrace all at once). The first error stops the reading.
class TraceReader {
 public:
  TraceReader(std::string file, TraceFormat format);
  // Reads the next bytes of the file; false once an error was found (later calls do nothing).
  bool feed(std::string_view bytes);
  // Reserves room for the rows of a file of `totalBytes`, estimated from the bytes fed so far
  // (loadTrace calls it after the first block: no reallocation while reading).
  void expectBytes(std::uint64_t totalBytes);
  // The trace, or null with `error` set to "PATH:LINE: problem (the value found; what is
  // allowed)". Call once, after the last feed().
  [[nodiscard]] std::shared_ptr<const Trace> finish(std::string& error);

 private:
  void line(std::string_view text);
  void header(std::string_view text);
  bool fail(std::size_t line, const std::string& what);
  bool tokens(std::string_view name, std::optional<std::int64_t> v, std::string_view raw,
              std::int64_t& out);
  bool time(std::string_view name, std::optional<double> v, std::string_view raw, double toNs,
            double limit, std::int64_t& out);
  void row(std::int64_t t, std::int64_t input, std::int64_t output);

  std::shared_ptr<Trace> trace_;
  std::string error_;
  std::string carry_;  // a line not yet ended by a newline
  std::size_t line_ = 0;
  std::uint64_t fed_ = 0;  // bytes fed
  bool headerChecked_ = false;
  // The columns of a CSV format (from the header, else 0, 1, 2) and the fields a row has.
  std::size_t timeColumn_ = 0, inputColumn_ = 1, outputColumn_ = 2, columns_ = 3;
  std::vector<std::string_view> fields_;
  std::int64_t origin_ = 0;
};

// Reads `path` in `format`, or returns the copy already read (same path, format, size and
// modification time). On error returns null and sets `error` to "PATH:LINE: problem (the value
// found; what is allowed)" or "PATH: problem".
[[nodiscard]] std::shared_ptr<const Trace> loadTrace(const std::string& path, TraceFormat format,
                                                     std::string& error);

// Parses `text` as the contents of a trace file named `file` (loadTrace without the file system).
[[nodiscard]] std::shared_ptr<const Trace> parseTrace(std::string_view text,
                                                      const std::string& file, TraceFormat format,
                                                      std::string& error);

// Trace-time nanoseconds at which a run with `seed` starts: startSeconds + (seed - 1) x
// kTraceSeedStrideSeconds, modulo the trace's period (seed 0 plays as seed 1).
[[nodiscard]] std::int64_t traceStartNs(const Trace& trace, double startSeconds,
                                        std::uint64_t seed);

// Replays a trace from a start offset: the k-th arrival of the run is the trace's row at or after
// the offset, looping after the last row, at run time (row time - offset) / timeScale.
class TraceCursor {
 public:
  TraceCursor() = default;
  TraceCursor(std::shared_ptr<const Trace> trace, std::int64_t startNs, double timeScale);
  // The current row's run time in nanoseconds and its sizes.
  [[nodiscard]] std::int64_t time() const noexcept { return time_; }
  [[nodiscard]] std::int64_t input() const noexcept { return trace_->inputTokens[row_]; }
  [[nodiscard]] std::int64_t output() const noexcept { return trace_->outputTokens[row_]; }
  // Moves to the next row.
  void advance() noexcept;

 private:
  void place() noexcept;

  std::shared_ptr<const Trace> trace_;
  std::size_t row_ = 0;
  std::int64_t loop_ = 0;  // completed loops of the trace since the start row's loop
  std::int64_t startNs_ = 0;
  double timeScale_ = 1.0;
  std::int64_t time_ = 0;
};

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
