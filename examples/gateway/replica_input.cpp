#include "replica_input.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

namespace holdback::gateway {

std::string_view toString(RejectReason reason) noexcept {
  switch (reason) {
    case RejectReason::kMalformed:
      return "malformed";
    case RejectReason::kNotFinite:
      return "not_finite";
    case RejectReason::kNegative:
      return "negative";
    case RejectReason::kOutOfRange:
      return "out_of_range";
    case RejectReason::kTime:
      return "time";
    case RejectReason::kTooLong:
      return "too_long";
    case RejectReason::kTooMany:
      return "too_many";
    case RejectReason::kWrongType:
      return "wrong_type";
    case RejectReason::kFingerprint:
      return "fingerprint";
  }
  return "malformed";
}

bool parseBoundedInt(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out,
                     RejectReason& why) noexcept {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || at != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    why = RejectReason::kMalformed;
    return false;
  }
  if (ec == std::errc::result_out_of_range) {  // the digits are whole: only the size is wrong
    why = text.front() == '-' ? (lo >= 0 ? RejectReason::kNegative : RejectReason::kOutOfRange)
                              : RejectReason::kOutOfRange;
    return false;
  }
  if (v < lo || v > hi) {
    why = v < 0 && lo >= 0 ? RejectReason::kNegative : RejectReason::kOutOfRange;
    return false;
  }
  out = v;
  return true;
}

bool parseBoundedDouble(std::string_view text, double lo, double hi, double& out,
                        RejectReason& why) noexcept {
  double v = 0.0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (text.empty() || at != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    why = RejectReason::kMalformed;
    return false;
  }
  if (ec == std::errc::result_out_of_range) {  // beyond a double: 1e400, or -1e400
    why = text.front() == '-' && lo >= 0.0 ? RejectReason::kNegative : RejectReason::kOutOfRange;
    return false;
  }
  if (!std::isfinite(v)) {
    why = RejectReason::kNotFinite;
    return false;
  }
  if (v < lo || v > hi) {
    why = v < 0.0 && lo >= 0.0 ? RejectReason::kNegative : RejectReason::kOutOfRange;
    return false;
  }
  out = v;
  return true;
}

bool parsePending(std::string_view text, InFlightLoad& out, RejectReason& why) noexcept {
  if (text.size() > ReplicaInputLimits::kMaxPendingBytes) {
    why = RejectReason::kTooLong;
    return false;
  }
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) {
    why = RejectReason::kMalformed;
    return false;
  }
  std::int64_t requests = 0;
  std::int64_t tokens = 0;
  constexpr std::int64_t kMax = ReplicaInputLimits::kMaxPending;
  if (!parseBoundedInt(text.substr(0, space), 0, kMax, requests, why) ||
      !parseBoundedInt(text.substr(space + 1), 0, kMax, tokens, why)) {
    return false;
  }
  out = InFlightLoad{requests, tokens};
  return true;
}

bool validReplicaId(std::string_view id, RejectReason& why) noexcept {
  if (id.size() > ReplicaInputLimits::kMaxIdBytes) {
    why = RejectReason::kTooLong;
    return false;
  }
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127; })) {
    why = RejectReason::kMalformed;
    return false;
  }
  return true;
}

bool parseFeedEvent(std::string_view line, FeedEvent& out, RejectReason& why) noexcept {
  if (line.size() > ReplicaInputLimits::kMaxFeedLineBytes) {
    why = RejectReason::kTooLong;
    return false;
  }
  if (line.size() < 5 || (line[0] != 'D' && line[0] != 'C' && line[0] != 'A') || line[1] != ' ') {
    why = RejectReason::kMalformed;
    return false;
  }
  const std::string_view rest = line.substr(2);
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos || space + 1 == rest.size()) {
    why = RejectReason::kMalformed;
    return false;
  }
  FeedEvent e;
  e.kind = line[0];
  if (!parseBoundedInt(rest.substr(0, space), 0, ReplicaInputLimits::kMaxPending, e.tokens, why)) {
    return false;
  }
  const std::string_view last = rest.substr(space + 1);
  if (e.kind == 'A') {
    std::int64_t priority = 0;
    if (!parseBoundedInt(last, std::numeric_limits<Priority>::min(),
                         std::numeric_limits<Priority>::max(), priority, why)) {
      return false;
    }
    e.priority = static_cast<Priority>(priority);
  } else {
    if (last.find(' ') != std::string_view::npos) {
      why = RejectReason::kMalformed;
      return false;
    }
    e.url = last;
  }
  out = e;
  return true;
}

bool parseFeedHeader(std::string_view line, std::string_view& id, std::string_view& fingerprint,
                     RejectReason& why) noexcept {
  const std::size_t space = line.find(' ');
  if (space == std::string_view::npos) {
    // No fingerprint: a replica of an older build (or not a replica).
    if (validReplicaId(line, why)) why = RejectReason::kFingerprint;
    return false;
  }
  const std::string_view theirs = line.substr(space + 1);
  if (!validReplicaId(line.substr(0, space), why)) return false;
  if (theirs.size() > ReplicaInputLimits::kMaxFingerprintBytes) {
    why = RejectReason::kTooLong;
    return false;
  }
  id = line.substr(0, space);
  fingerprint = theirs;
  return true;
}

namespace {
constexpr std::uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;
void fnv(std::uint64_t& h, std::string_view bytes) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnvPrime;
  }
  h ^= 0xffU;  // a separator no text holds (0xff is not UTF-8)
  h *= kFnvPrime;
}
}  // namespace

std::string configFingerprint(std::string_view configText, std::vector<std::string> endpointUrls) {
  std::sort(endpointUrls.begin(), endpointUrls.end());
  std::uint64_t h = kFnvOffset;
  fnv(h, configText);
  for (const std::string& url : endpointUrls) fnv(h, url);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string defaultKeyPrefix(std::string_view fingerprint) {
  return "holdback:" + std::string(fingerprint.substr(0, 8)) + ":";
}

bool validKeyPrefix(std::string_view prefix, std::string& error) {
  if (prefix.empty() || prefix.size() > 128) {
    error = "1 to 128 characters";
    return false;
  }
  if (!std::all_of(prefix.begin(), prefix.end(), [](char c) { return c > ' ' && c < 127; })) {
    error = "printable ASCII without spaces";
    return false;
  }
  return true;
}

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= ' ' && c < 127 && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    }
  }
  if (text.size() > max) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

void ReplicaInputLog::reject(RejectReason reason, std::string_view where, std::string_view value,
                             std::chrono::steady_clock::time_point now) {
  const auto r = static_cast<std::size_t>(reason);
  if (r >= kRejectReasons) return;
  counters_[r].fetch_add(1, std::memory_order_relaxed);
  ++since_[r];
  if (logged_[r] && now - last_[r] < interval_) return;
  const std::string name(toString(reason));
  std::fprintf(
      out_,
      "holdback-gateway: %s: ignored a value read from Redis (%s): %.*s: \"%s\"; %llu "
      "ignored for %s since the last such line (said at most every %llds per reason)\n",
      who_, name.c_str(), static_cast<int>(where.size()), where.data(), printable(value).c_str(),
      static_cast<unsigned long long>(since_[r]), name.c_str(),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(interval_).count()));
  std::fflush(out_);
  logged_[r] = true;
  last_[r] = now;
  since_[r] = 0;
}

void ReplicaInputLog::foreign(std::string_view id, std::string_view theirs, std::string_view mine) {
  counters_[static_cast<std::size_t>(RejectReason::kFingerprint)].fetch_add(
      1, std::memory_order_relaxed);
  if (foreign_.size() >= kMaxForeign || foreign_.count(std::string(id)) != 0) return;
  foreign_.emplace(id);
  const std::string published = theirs.empty() ? "(none)" : "\"" + printable(theirs) + "\"";
  std::fprintf(out_,
               "holdback-gateway: %s: ignoring replica %s: it publishes config fingerprint %s, "
               "this replica %.*s (another config or other model servers under the same key "
               "prefix; give each fleet its own --replica-sync-prefix)\n",
               who_, printable(id).c_str(), published.c_str(), static_cast<int>(mine.size()),
               mine.data());
  std::fflush(out_);
}

}  // namespace holdback::gateway
