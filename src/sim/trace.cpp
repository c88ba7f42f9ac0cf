// Trace files as arrivals (src/sim/trace.hpp): loading with its cache, and the cursor (the
// readers are in trace_reader.cpp).
#include "sim/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>
#include <vector>

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

std::string_view toString(TraceFormat format) noexcept {
  switch (format) {
    case TraceFormat::kAzure:
      return "azure";
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kCsv:
      return "csv";
  }
  return "azure";
}

std::shared_ptr<const Trace> loadTrace(const std::string& path, TraceFormat format,
                                       std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    error = path + ": no such trace file";
    return nullptr;
  }
  if (!fs::is_regular_file(status)) {
    error = path + ": not a regular file";
    return nullptr;
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) {
    error = path + ": cannot read (" + ec.message() + ")";
    return nullptr;
  }
  if (size > kMaxTraceFileBytes) {
    error = path + ": " + std::to_string(size) + " bytes; a trace file is at most " +
            std::to_string(kMaxTraceFileBytes) + " bytes (2 GiB)";
    return nullptr;
  }
  const std::string key = fs::absolute(path, ec).lexically_normal().string() + '\n' +
                          std::string(toString(format)) + '\n' + std::to_string(size) + '\n' +
                          std::to_string(mtime.time_since_epoch().count());
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Trace>> cache;
  std::lock_guard lock(mutex);  // one reader at a time: a second asker waits for the first read
  if (auto it = cache.find(key); it != cache.end()) {
    if (auto cached = it->second.lock()) return cached;
  }
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"),
                                                           &std::fclose);
  if (!in) {
    error = path + ": cannot read";
    return nullptr;
  }
  // In blocks: the rows are kept, not the file's text.
  TraceReader reader(path, format);
  std::vector<char> block(std::size_t{4} << 20);
  std::uintmax_t read = 0;
  while (read < size) {
    const std::size_t got = std::fread(block.data(), 1, block.size(), in.get());
    if (got == 0) break;
    read += got;
    if (!reader.feed(std::string_view(block.data(), got))) break;
    if (read == got) reader.expectBytes(size);
  }
  if (read < size && std::ferror(in.get()) != 0) {
    error = path + ": cannot read";
    return nullptr;
  }
  auto trace = reader.finish(error);
  if (trace) cache[key] = trace;
  return trace;
}

namespace {
// (a x b) mod m without overflow, for m < 2^63 (binary multiplication).
std::uint64_t mulMod(std::uint64_t a, std::uint64_t b, std::uint64_t m) {
  std::uint64_t result = 0;
  a %= m;
  for (; b > 0; b >>= 1) {
    if ((b & 1) != 0) result = (result + a) % m;
    a = (a + a) % m;
  }
  return result;
}
}  // namespace

std::int64_t traceStartNs(const Trace& trace, double startSeconds, std::uint64_t seed) {
  const auto period = static_cast<std::uint64_t>(trace.periodNs);
  const auto start = static_cast<std::uint64_t>(std::llround(startSeconds * 1e9)) % period;
  const std::uint64_t k = seed == 0 ? 0 : seed - 1;
  const auto stride = static_cast<std::uint64_t>(std::llround(kTraceSeedStrideSeconds * 1e9));
  return static_cast<std::int64_t>((start + mulMod(k, stride, period)) % period);
}

TraceCursor::TraceCursor(std::shared_ptr<const Trace> trace, std::int64_t startNs, double timeScale)
    : trace_(std::move(trace)), startNs_(startNs), timeScale_(timeScale) {
  const auto& t = trace_->timeNs;
  row_ = static_cast<std::size_t>(std::lower_bound(t.begin(), t.end(), startNs_) - t.begin());
  if (row_ == t.size()) {
    row_ = 0;
    loop_ = 1;
  }
  place();
}

void TraceCursor::advance() noexcept {
  if (++row_ == trace_->timeNs.size()) {
    row_ = 0;
    ++loop_;
  }
  place();
}

void TraceCursor::place() noexcept {
  const std::int64_t traceTime = trace_->timeNs[row_] + loop_ * trace_->periodNs - startNs_;
  time_ =
      timeScale_ == 1.0
          ? traceTime
          : static_cast<std::int64_t>(std::llround(static_cast<double>(traceTime) / timeScale_));
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
