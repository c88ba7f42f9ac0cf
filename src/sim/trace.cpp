// Trace files as arrivals (src/sim/trace.hpp): three readers, the cache and the cursor.
#include "sim/trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>

#include "holdback/config/json.hpp"

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

namespace {

constexpr std::size_t kShown = 40;  // characters of a bad value quoted in a message

std::string quoted(std::string_view v) {
  if (v.size() > kShown) return "\"" + std::string(v.substr(0, kShown)) + "...\"";
  return "\"" + std::string(v) + "\"";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits a CSV line into exactly `n` fields (no quoting: the formats have none).
bool splitFields(std::string_view line, std::size_t n, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out.size() == n;
}

std::optional<std::int64_t> wholeInteger(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> wholeNumber(std::string_view s) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Days from 1970-01-01 to y-m-d (proleptic Gregorian).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// "2023-11-16 18:17:03.9799600" (or with a T) as nanoseconds since 1970-01-01.
std::optional<std::int64_t> azureTimestamp(std::string_view s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  auto digits = [&](std::size_t at, std::size_t n) -> std::optional<std::int64_t> {
    std::int64_t v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  };
  const auto y = digits(0, 4), mo = digits(5, 2), d = digits(8, 2), h = digits(11, 2),
             mi = digits(14, 2), sec = digits(17, 2);
  // Years 1900-2200 keep nanoseconds since 1970 well inside 64 bits.
  if (!y || !mo || !d || !h || !mi || !sec || *y < 1900 || *y > 2200 || *mo < 1 || *mo > 12 ||
      *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *sec > 60) {
    return std::nullopt;
  }
  std::int64_t fraction = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20 || s.size() > 29) return std::nullopt;
    const std::size_t n = s.size() - 20;
    const auto f = digits(20, n);
    if (!f) return std::nullopt;
    fraction = *f;
    for (std::size_t i = n; i < 9; ++i) fraction *= 10;
  }
  const std::int64_t days =
      daysFromCivil(*y, static_cast<unsigned>(*mo), static_cast<unsigned>(*d));
  return ((days * 24 + *h) * 60 + *mi) * 60 * 1'000'000'000LL + *sec * 1'000'000'000LL + fraction;
}

// One reader over the lines of a trace, collecting rows and the first error.
class Reader {
 public:
  Reader(const std::string& file, TraceFormat format) : trace_(std::make_shared<Trace>()) {
    trace_->file = file;
    trace_->format = format;
  }

  bool fail(std::size_t line, const std::string& what) {
    error_ = trace_->file + ":" + std::to_string(line) + ": " + what;
    return false;
  }

  bool tokens(std::size_t line, std::string_view name, std::optional<std::int64_t> v,
              std::string_view raw, std::int64_t& out) {
    if (!v) {
      return fail(line, std::string(name) + " " + quoted(raw) +
                            " is not an integer; token counts are integers in [0, " +
                            std::to_string(kMaxTraceTokens) + "]");
    }
    if (*v < 0 || *v > kMaxTraceTokens) {
      return fail(line, std::string(name) + " " + std::to_string(*v) +
                            (*v < 0 ? " is negative" : " is too large") +
                            "; token counts are integers in [0, " +
                            std::to_string(kMaxTraceTokens) + "]");
    }
    out = std::max<std::int64_t>(1, *v);
    return true;
  }

  // A row at absolute time `t` (ns in the file's own origin).
  bool row(std::size_t line, std::int64_t t, std::int64_t input, std::int64_t output) {
    if (trace_->timeNs.size() >= kMaxTraceRows) {
      return fail(line, "more than " + std::to_string(kMaxTraceRows) +
                            " requests; at most that many are read from one trace");
    }
    if (trace_->timeNs.empty()) origin_ = t;
    const std::int64_t rel = t - origin_;
    if (!trace_->timeNs.empty() && rel < trace_->timeNs.back()) {
      return fail(line, "the timestamp is earlier than the previous row's (by " +
                            formatNumber(static_cast<double>(trace_->timeNs.back() - rel) / 1e9) +
                            " s); the rows must be sorted by time");
    }
    if (static_cast<double>(rel) > kMaxTraceSpanSeconds * 1e9) {
      return fail(line, "the timestamp is " + formatNumber(static_cast<double>(rel) / 1e9) +
                            " s after the first row's; a trace spans at most " +
                            formatNumber(kMaxTraceSpanSeconds) + " s");
    }
    trace_->timeNs.push_back(rel);
    trace_->inputTokens.push_back(input);
    trace_->outputTokens.push_back(output);
    return true;
  }

  // Seconds (csv) or milliseconds (mooncake) as nanoseconds, finite and bounded.
  bool time(std::size_t line, std::string_view name, std::optional<double> v, std::string_view raw,
            double toNs, double limit, std::int64_t& out) {
    if (!v || !std::isfinite(*v) || std::fabs(*v) > limit) {
      return fail(line, std::string(name) + " " + quoted(raw) + " is not a finite number in [-" +
                            formatNumber(limit) + ", " + formatNumber(limit) + "]");
    }
    out = std::llround(*v * toNs);
    return true;
  }

  std::shared_ptr<const Trace> finish(std::size_t lines, std::string& error) {
    if (!error_.empty()) {
      error = error_;
      return nullptr;
    }
    Trace& t = *trace_;
    if (t.timeNs.empty()) {
      error = t.file + ":" + std::to_string(lines) + ": the trace has no requests";
      return nullptr;
    }
    const std::int64_t last = t.timeNs.back();
    const auto n = static_cast<std::int64_t>(t.timeNs.size());
    // One row, or every row at one instant: no mean gap; such a trace loops every second.
    t.periodNs =
        n > 1 && last > 0 ? std::max<std::int64_t>(1, last + last / (n - 1)) : 1'000'000'000;
    return trace_;
  }

  const std::string& error() const { return error_; }

 private:
  std::shared_ptr<Trace> trace_;
  std::int64_t origin_ = 0;
  std::string error_;
};

}  // namespace

std::shared_ptr<const Trace> parseTrace(std::string_view text, const std::string& file,
                                        TraceFormat format, std::string& error) {
  Reader reader(file, format);
  std::vector<std::string_view> fields;
  std::size_t lineNo = 0;
  bool header = format != TraceFormat::kMooncake;  // the next non-empty line may be a header
  std::size_t start = 0;
  while (start < text.size() && reader.error().empty()) {
    const std::size_t nl = text.find('\n', start);
    const std::string_view line =
        trim(text.substr(start, nl == std::string_view::npos ? nl : nl - start));
    start = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lineNo;
    if (line.empty()) continue;
    if (format == TraceFormat::kMooncake) {
      const config::Json j = config::Json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        reader.fail(lineNo,
                    "not a JSON object; each line is one request, {\"timestamp\": ms, "
                    "\"input_length\": tokens, \"output_length\": tokens, ...}");
        break;
      }
      std::int64_t t = 0, in = 0, out = 0;
      auto field = [&](const char* key) -> const config::Json* {
        const auto it = j.find(key);
        if (it == j.end()) {
          reader.fail(lineNo, std::string("no \"") + key + "\" key");
          return nullptr;
        }
        return &*it;
      };
      auto integer = [](const config::Json* v) -> std::optional<std::int64_t> {
        if (v->is_number_integer()) return v->get<std::int64_t>();
        if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
            std::fabs(v->get<double>()) < 9e18) {
          return static_cast<std::int64_t>(v->get<double>());
        }
        return std::nullopt;
      };
      const config::Json* ts = field("timestamp");
      if (ts == nullptr) break;
      const std::string shown = config::describe(*ts);
      if (!reader.time(lineNo, "timestamp",
                       ts->is_number() ? std::optional<double>(ts->get<double>()) : std::nullopt,
                       shown, 1e6, 4e12, t)) {
        break;
      }
      const config::Json* vi = field("input_length");
      if (vi == nullptr ||
          !reader.tokens(lineNo, "input_length", integer(vi), config::describe(*vi), in)) {
        break;
      }
      const config::Json* vo = field("output_length");
      if (vo == nullptr ||
          !reader.tokens(lineNo, "output_length", integer(vo), config::describe(*vo), out)) {
        break;
      }
      reader.row(lineNo, t, in, out);
      continue;
    }
    const bool azure = format == TraceFormat::kAzure;
    if (!splitFields(line, 3, fields)) {
      reader.fail(lineNo, "found " + std::to_string(fields.size()) + " fields in " + quoted(line) +
                              "; expected 3: " +
                              (azure ? "TIMESTAMP,ContextTokens,GeneratedTokens"
                                     : "seconds,input_tokens,output_tokens"));
      break;
    }
    if (header) {
      header = false;
      const bool numeric =
          azure ? azureTimestamp(fields[0]).has_value() : wholeNumber(fields[0]).has_value();
      if (!numeric) continue;  // the header line
      if (!azure) {
        reader.fail(lineNo,
                    "expected the header line seconds,input_tokens,output_tokens, found "
                    "a data row " +
                        quoted(line));
        break;
      }
    }
    std::int64_t t = 0, in = 0, out = 0;
    if (azure) {
      const auto ts = azureTimestamp(fields[0]);
      if (!ts) {
        reader.fail(lineNo,
                    "TIMESTAMP " + quoted(fields[0]) +
                        " is not a time like 2023-11-16 18:17:03.9799600 (years 1900-2200)");
        break;
      }
      t = *ts;
    } else if (!reader.time(lineNo, "seconds", wholeNumber(fields[0]), fields[0], 1e9, 1e9, t)) {
      break;
    }
    if (!reader.tokens(lineNo, azure ? "ContextTokens" : "input_tokens", wholeInteger(fields[1]),
                       fields[1], in) ||
        !reader.tokens(lineNo, azure ? "GeneratedTokens" : "output_tokens", wholeInteger(fields[2]),
                       fields[2], out)) {
      break;
    }
    reader.row(lineNo, t, in, out);
  }
  return reader.finish(lineNo, error);
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
            std::to_string(kMaxTraceFileBytes) + " bytes (256 MiB)";
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
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size))) {
    error = path + ": cannot read";
    return nullptr;
  }
  auto trace = parseTrace(text, path, format, error);
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
