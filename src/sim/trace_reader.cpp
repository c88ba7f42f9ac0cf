// Reading trace files (src/sim/trace.hpp): TraceReader's three formats, fed in blocks.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include "holdback/config/json.hpp"
#include "holdback/core/text.hpp"
#include "sim/trace.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {
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

// Splits a CSV line into its fields (no quoting: the formats have none).
void splitFields(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
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

// "2023-11-16 18:17:03.9799600" (or with a T), optionally ending in a UTC offset ("Z",
// "+00:00", "-0700"), as nanoseconds since 1970-01-01 UTC.
std::optional<std::int64_t> azureTimestamp(std::string_view s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  auto digits = [&](std::size_t at, std::size_t n) -> std::optional<std::int64_t> {
    if (at + n > s.size()) return std::nullopt;
    std::int64_t v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (!holdback::detail::isDigit(s[i])) return std::nullopt;
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
  std::size_t at = 19;
  std::int64_t fraction = 0;
  if (at < s.size() && s[at] == '.') {  // 1 to 9 digits
    std::size_t n = 0;
    while (at + 1 + n < s.size() && holdback::detail::isDigit(s[at + 1 + n])) ++n;
    if (n == 0 || n > 9) return std::nullopt;
    fraction = *digits(at + 1, n);
    for (std::size_t i = n; i < 9; ++i) fraction *= 10;
    at += 1 + n;
  }
  std::int64_t offsetMinutes = 0;  // local time = UTC + offset
  if (at < s.size()) {
    const std::string_view zone = s.substr(at);
    if (zone != "Z") {
      if (zone[0] != '+' && zone[0] != '-') return std::nullopt;
      const bool colon = zone.size() == 6 && zone[3] == ':';
      if (zone.size() != (colon ? 6u : 5u)) return std::nullopt;
      const auto oh = digits(at + 1, 2), om = digits(at + (colon ? 4 : 3), 2);
      if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
      offsetMinutes = (zone[0] == '-' ? -1 : 1) * (*oh * 60 + *om);
    }
  }
  const std::int64_t days =
      daysFromCivil(*y, static_cast<unsigned>(*mo), static_cast<unsigned>(*d));
  const std::int64_t minutes = (days * 24 + *h) * 60 + *mi - offsetMinutes;
  return minutes * 60 * 1'000'000'000LL + *sec * 1'000'000'000LL + fraction;
}

// The column names of a CSV format's header, in the order of a file without one.
std::array<std::string_view, 3> columnNames(TraceFormat format) {
  if (format == TraceFormat::kAzure) return {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  return {"seconds", "input_tokens", "output_tokens"};
}

// "a,b,c": the columns as a file without a header has them.
std::string columnList(TraceFormat format) {
  const auto names = columnNames(format);
  return std::string(names[0]) + "," + std::string(names[1]) + "," + std::string(names[2]);
}

bool sameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

TraceReader::TraceReader(std::string file, TraceFormat format) : trace_(std::make_shared<Trace>()) {
  trace_->file = std::move(file);
  trace_->format = format;
}

bool TraceReader::fail(std::size_t line, const std::string& what) {
  if (error_.empty()) error_ = trace_->file + ":" + std::to_string(line) + ": " + what;
  return false;
}

bool TraceReader::tokens(std::string_view name, std::optional<std::int64_t> v, std::string_view raw,
                         std::int64_t& out) {
  if (!v) {
    return fail(line_, std::string(name) + " " + quoted(raw) +
                           " is not an integer; token counts are integers in [0, " +
                           std::to_string(kMaxTraceTokens) + "]");
  }
  if (*v < 0 || *v > kMaxTraceTokens) {
    return fail(line_, std::string(name) + " " + std::to_string(*v) +
                           (*v < 0 ? " is negative" : " is too large") +
                           "; token counts are integers in [0, " + std::to_string(kMaxTraceTokens) +
                           "]");
  }
  out = std::max<std::int64_t>(1, *v);
  return true;
}

// Seconds (csv) or milliseconds (mooncake) as nanoseconds, finite and bounded.
bool TraceReader::time(std::string_view name, std::optional<double> v, std::string_view raw,
                       double toNs, double limit, std::int64_t& out) {
  if (!v || !std::isfinite(*v) || std::fabs(*v) > limit) {
    return fail(line_, std::string(name) + " " + quoted(raw) + " is not a finite number in [-" +
                           formatNumber(limit) + ", " + formatNumber(limit) + "]");
  }
  out = std::llround(*v * toNs);
  return true;
}

// A row at absolute time `t` (ns in the file's own origin).
void TraceReader::row(std::int64_t t, std::int64_t input, std::int64_t output) {
  Trace& trace = *trace_;
  if (trace.timeNs.size() >= kMaxTraceRows) {
    fail(line_, "more than " + std::to_string(kMaxTraceRows) +
                    " requests; at most that many are read from one trace");
    return;
  }
  if (trace.timeNs.empty()) origin_ = t;
  const std::int64_t rel = t - origin_;
  if (!trace.timeNs.empty() && rel < trace.timeNs.back()) {
    fail(line_, "the timestamp is earlier than the previous row's (by " +
                    formatNumber(static_cast<double>(trace.timeNs.back() - rel) / 1e9) +
                    " s); the rows must be sorted by time");
    return;
  }
  if (static_cast<double>(rel) > kMaxTraceSpanSeconds * 1e9) {
    fail(line_, "the timestamp is " + formatNumber(static_cast<double>(rel) / 1e9) +
                    " s after the first row's; a trace spans at most " +
                    formatNumber(kMaxTraceSpanSeconds) + " s");
    return;
  }
  trace.timeNs.push_back(rel);
  trace.inputTokens.push_back(input);
  trace.outputTokens.push_back(output);
}

// A CSV format's header line: each of the format's three columns by name (any case, any order),
// other columns ignored.
void TraceReader::header(std::string_view text) {
  const auto names = columnNames(trace_->format);
  std::array<std::size_t, 3> at{};
  for (std::size_t k = 0; k < names.size(); ++k) {
    at[k] = fields_.size();
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      if (!sameName(fields_[i], names[k])) continue;
      if (at[k] != fields_.size()) {
        fail(line_,
             "the header " + quoted(text) + " names \"" + std::string(names[k]) + "\" twice");
        return;
      }
      at[k] = i;
    }
    if (at[k] == fields_.size()) {
      fail(line_, "the header " + quoted(text) + " has no \"" + std::string(names[k]) +
                      "\" column; the columns are " + columnList(trace_->format) +
                      " (in any order; other columns are ignored)");
      return;
    }
  }
  timeColumn_ = at[0];
  inputColumn_ = at[1];
  outputColumn_ = at[2];
  columns_ = fields_.size();
}

void TraceReader::line(std::string_view text) {
  // A UTF-8 byte order mark before the first line (spreadsheet exports) is not part of it.
  if (line_ == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  text = trim(text);
  if (text.empty()) return;
  const TraceFormat format = trace_->format;
  if (format == TraceFormat::kMooncake) {
    const config::Json j = config::Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      fail(line_,
           "not a JSON object; each line is one request, {\"timestamp\": ms, "
           "\"input_length\": tokens, \"output_length\": tokens, ...}");
      return;
    }
    auto field = [&](const char* key) -> const config::Json* {
      const auto it = j.find(key);
      if (it == j.end()) {
        fail(line_, std::string("no \"") + key + "\" key");
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
    std::int64_t t = 0, in = 0, out = 0;
    const config::Json* ts = field("timestamp");
    if (ts == nullptr ||
        !time("timestamp",
              ts->is_number() ? std::optional<double>(ts->get<double>()) : std::nullopt,
              config::describe(*ts), 1e6, 4e12, t)) {
      return;
    }
    const config::Json* vi = field("input_length");
    if (vi == nullptr || !tokens("input_length", integer(vi), config::describe(*vi), in)) return;
    const config::Json* vo = field("output_length");
    if (vo == nullptr || !tokens("output_length", integer(vo), config::describe(*vo), out)) return;
    row(t, in, out);
    return;
  }
  const bool azure = format == TraceFormat::kAzure;
  splitFields(text, fields_);
  if (!headerChecked_) {
    headerChecked_ = true;
    // An Azure file may start with its first row (a time); a csv file needs its header.
    const bool data = azure ? !fields_[0].empty() && holdback::detail::isDigit(fields_[0][0])
                            : wholeNumber(fields_[0]).has_value();
    if (!data) {
      header(text);
      return;
    }
    if (!azure) {
      fail(line_,
           "expected the header line " + columnList(format) + ", found a data row " + quoted(text));
      return;
    }
  }
  if (fields_.size() != columns_) {
    fail(line_, "found " + std::to_string(fields_.size()) + " fields in " + quoted(text) +
                    "; expected " + std::to_string(columns_) +
                    (columns_ == 3 ? ": " + columnList(format) : " (the header's columns)"));
    return;
  }
  std::int64_t t = 0, in = 0, out = 0;
  const std::string_view stamp = fields_[timeColumn_];
  if (azure) {
    const auto ts = azureTimestamp(stamp);
    if (!ts) {
      fail(line_, "TIMESTAMP " + quoted(stamp) +
                      " is not a time like 2023-11-16 18:17:03.9799600 or 2024-05-10 "
                      "00:00:00.009930+00:00 (years 1900-2200)");
      return;
    }
    t = *ts;
  } else if (!time("seconds", wholeNumber(stamp), stamp, 1e9, 1e9, t)) {
    return;
  }
  const auto names = columnNames(format);
  const std::string_view rawIn = fields_[inputColumn_], rawOut = fields_[outputColumn_];
  if (!tokens(names[1], wholeInteger(rawIn), rawIn, in) ||
      !tokens(names[2], wholeInteger(rawOut), rawOut, out)) {
    return;
  }
  row(t, in, out);
}

void TraceReader::expectBytes(std::uint64_t totalBytes) {
  Trace& t = *trace_;
  if (fed_ == 0 || t.timeNs.empty() || totalBytes <= fed_) return;
  const double rows = static_cast<double>(t.timeNs.size()) * static_cast<double>(totalBytes) /
                      static_cast<double>(fed_);
  const auto n =
      static_cast<std::size_t>(std::min(rows * 1.05 + 16.0, static_cast<double>(kMaxTraceRows)));
  t.timeNs.reserve(n);
  t.inputTokens.reserve(n);
  t.outputTokens.reserve(n);
}

bool TraceReader::feed(std::string_view bytes) {
  fed_ += bytes.size();
  while (!bytes.empty() && error_.empty()) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (carry_.size() + piece.size() > kMaxTraceLineBytes) {
      return fail(line_ + 1, "the line is longer than " + std::to_string(kMaxTraceLineBytes) +
                                 " bytes; a trace's lines are at most that long");
    }
    if (nl == std::string_view::npos) {  // the line goes on in the next piece
      carry_.append(piece);
      return true;
    }
    bytes.remove_prefix(nl + 1);
    ++line_;
    if (carry_.empty()) {
      line(piece);
    } else {
      carry_.append(piece);
      line(carry_);
      carry_.clear();
    }
  }
  return error_.empty();
}

std::shared_ptr<const Trace> TraceReader::finish(std::string& error) {
  if (error_.empty() && !carry_.empty()) {  // a last line without a newline
    ++line_;
    line(carry_);
    carry_.clear();
  }
  if (!error_.empty()) {
    error = error_;
    return nullptr;
  }
  Trace& t = *trace_;
  if (t.timeNs.empty()) {
    error = t.file + ":" + std::to_string(line_) + ": the trace has no requests";
    return nullptr;
  }
  if (t.timeNs.capacity() > t.timeNs.size() + t.timeNs.size() / 4 + 1024) {  // a poor estimate
    t.timeNs.shrink_to_fit();
    t.inputTokens.shrink_to_fit();
    t.outputTokens.shrink_to_fit();
  }
  const std::int64_t last = t.timeNs.back();
  const auto n = static_cast<std::int64_t>(t.timeNs.size());
  // One row, or every row at one instant: no mean gap; such a trace loops every second.
  t.periodNs = n > 1 && last > 0 ? std::max<std::int64_t>(1, last + last / (n - 1)) : 1'000'000'000;
  return trace_;
}

std::shared_ptr<const Trace> parseTrace(std::string_view text, const std::string& file,
                                        TraceFormat format, std::string& error) {
  TraceReader reader(file, format);
  reader.feed(text);
  return reader.finish(error);
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
