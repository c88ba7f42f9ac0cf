#include "gateway_http.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "json_scan.hpp"

namespace holdback::gateway {
namespace {

std::optional<int> parseInt(std::string_view s, long long lo, long long hi) {
  long long v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return static_cast<int>(v);
}

// The prompt-token estimate of one string: max(words, ceil(bytes / 4)) (the fake model
// server counts the same way; a real tokenizer gives about 4 bytes of English per token).
std::int64_t estimateTokens(std::string_view text) {
  std::int64_t words = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return std::max(words, static_cast<std::int64_t>((text.size() + 3) / 4));
}

// The events of scanCompletionBody (json_scan.hpp): tracks the nesting depth and the value that
// follows the top-level key "stream".
class CompletionBodyScan {
 public:
  bool null() { return value(); }
  bool boolean(bool v) {
    const bool stream = top_ == Top::kStream && depth_ == 1;
    value();
    if (stream) result.stream = v;
    return true;
  }
  bool integer(std::int64_t v) { return number(v); }
  bool unsignedInteger(std::uint64_t v) {
    return number(v > std::uint64_t(INT64_MAX) ? INT64_MAX : std::int64_t(v));
  }
  bool floating() { return value(); }
  bool string(std::string_view v) {
    if (inPrompt()) result.promptTokens = saturatingAdd(result.promptTokens, estimateTokens(v));
    return value();
  }
  bool startObject() {
    if (depth_ == 0) result.object = true;
    container();
    return deeper();
  }
  bool key(std::string_view k) {
    if (depth_ == 1) {
      top_ = k == "stream"                                       ? Top::kStream
             : k == "max_tokens" || k == "max_completion_tokens" ? Top::kMaxTokens
             : k == "prompt" || k == "messages"                  ? Top::kPrompt
                                                                 : Top::kOther;
    }
    return true;
  }
  bool endObject() { return end(); }
  bool startArray() {
    container();
    return deeper();
  }
  bool endArray() { return end(); }

  CompletionBody result;

 private:
  enum class Top { kOther, kStream, kMaxTokens, kPrompt };
  [[nodiscard]] bool inPrompt() const { return top_ == Top::kPrompt && depth_ >= 1; }
  static std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {
    return a > INT64_MAX - b ? INT64_MAX : a + b;
  }
  bool number(std::int64_t v) {
    const bool max_tokens = top_ == Top::kMaxTokens && depth_ == 1;
    if (inPrompt() && depth_ > 1) result.promptTokens = saturatingAdd(result.promptTokens, 1);
    value();
    if (max_tokens) result.maxTokens = v > 0 ? v : 0;
    return true;
  }
  // A value: a "stream" that is not a boolean is not true, a "max_tokens" that is not a positive
  // integer is not given (a later duplicate key wins); a container's end closes the top key.
  bool value() {
    if (depth_ == 1 && top_ == Top::kStream) result.stream = false;
    if (depth_ == 1 && top_ == Top::kMaxTokens) result.maxTokens = 0;
    if (depth_ == 1) top_ = Top::kOther;
    return true;
  }
  // A container as a top-level key's value: not a boolean "stream", not a "max_tokens" (the key
  // stays current for a "prompt" until the container ends).
  void container() {
    if (depth_ == 1 && top_ == Top::kStream) result.stream = false;
    if (depth_ == 1 && top_ == Top::kMaxTokens) result.maxTokens = 0;
  }
  // One level down; past kMaxJsonNesting the scan stops (the body is refused, tooDeep).
  bool deeper() {
    if (++depth_ > kMaxJsonNesting) {
      result.tooDeep = true;
      return false;
    }
    return true;
  }
  bool end() {
    --depth_;
    if (depth_ == 1) top_ = Top::kOther;
    return true;
  }
  std::size_t depth_ = 0;
  Top top_ = Top::kOther;
};

// The events of scanResponseUsage (json_scan.hpp): the last top-level "usage" object's two counts.
class ResponseUsageScan {
 public:
  bool null() { return scalar(); }
  bool boolean(bool /*v*/) { return scalar(); }
  bool integer(std::int64_t /*v*/) { return scalar(); }
  bool unsignedInteger(std::uint64_t v) {
    if (depth_ == 2 && in_usage_ && count_ != nullptr) {
      *count_ = v;
      count_ = nullptr;
      return true;
    }
    return scalar();
  }
  bool floating() { return scalar(); }
  bool string(std::string_view /*v*/) { return scalar(); }
  bool startObject() {
    if (depth_ == 0) object = true;
    if (depth_ == 1 && usage_key_) {  // the (last) "usage" object: counts absent from it are 0
      usage_key_ = false;
      in_usage_ = true;
      found = true;
      usage = {};
    } else {
      notACount();
    }
    return deeper();
  }
  bool key(std::string_view k) {
    if (depth_ == 1) {
      usage_key_ = k == "usage";
    } else if (depth_ == 2 && in_usage_) {
      count_ = k == "prompt_tokens"       ? &usage.promptTokens
               : k == "completion_tokens" ? &usage.completionTokens
                                          : nullptr;
    }
    return true;
  }
  bool endObject() { return end(); }
  bool startArray() {
    notACount();
    return deeper();
  }
  bool endArray() { return end(); }

  bool object = false;  // the body is a JSON object
  bool found = false;   // its last "usage" is an object
  ResponseUsage usage;

 private:
  bool scalar() {
    notACount();
    return true;
  }
  // A value that is not an object after "usage" (no usage), or not a non-negative integer after
  // a count (0).
  void notACount() {
    if (depth_ == 1 && usage_key_) {
      usage_key_ = false;
      found = false;
    }
    if (depth_ == 2 && in_usage_ && count_ != nullptr) {
      *count_ = 0;
      count_ = nullptr;
    }
  }
  bool deeper() { return ++depth_ <= kMaxJsonNesting; }  // past the limit the scan stops
  bool end() {
    --depth_;
    if (depth_ == 1) in_usage_ = false;
    return true;
  }
  std::size_t depth_ = 0;
  bool usage_key_ = false;          // the top-level key just read is "usage"
  bool in_usage_ = false;           // inside the "usage" object (its keys are at depth 2)
  std::uint64_t* count_ = nullptr;  // the count the value just after this key sets
};

}  // namespace

std::optional<ResponseUsage> scanResponseUsage(std::string_view body) {
  ResponseUsageScan scan;
  if (!json_scan::scan(body, scan)) return std::nullopt;
  if (!scan.object || !scan.found) return std::nullopt;
  return scan.usage;
}

CompletionBody scanCompletionBody(std::string_view body) {
  CompletionBodyScan scan;
  // Strict: the whole body is one JSON value. A syntax error ends the scan (returns false).
  if (!json_scan::scan(body, scan)) {
    return {.object = false, .tooDeep = scan.result.tooDeep};
  }
  return scan.result;
}

std::optional<std::string> checkFairnessId(std::string_view id) {
  if (id.size() > kMaxFairnessIdBytes) {
    return "the fairness id is " + std::to_string(id.size()) + " bytes long; at most " +
           std::to_string(kMaxFairnessIdBytes) + " are allowed";
  }
  if (!isValidUtf8(id)) return std::string("the fairness id is not valid UTF-8");
  for (const char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return std::string("the fairness id holds a control character");
    }
  }
  return std::nullopt;
}

ObjectiveTable ObjectiveTable::builtin() {
  ObjectiveTable t;
  t.entries_.emplace("interactive", 10);
  t.entries_.emplace("batch", -1);
  return t;
}

bool ObjectiveTable::set(std::string_view spec, std::string* error) {
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    if (error) *error = "expected NAME=PRIORITY, got \"" + std::string(spec) + "\"";
    return false;
  }
  const auto priority = parseInt(spec.substr(eq + 1), INT32_MIN, INT32_MAX);
  if (!priority) {
    if (error) {
      *error = "priority \"" + std::string(spec.substr(eq + 1)) +
               "\" is not a 32-bit integer (in \"" + std::string(spec) + "\")";
    }
    return false;
  }
  entries_.insert_or_assign(std::string(spec.substr(0, eq)), *priority);
  return true;
}

Priority ObjectiveTable::priorityOf(std::string_view objective) const {
  const auto it = entries_.find(objective);
  return it == entries_.end() ? 0 : it->second;
}

std::string flowIdFrom(std::string_view primary, std::string_view alias) {
  if (!primary.empty()) return std::string(primary);
  if (!alias.empty()) return std::string(alias);
  return std::string(kDefaultFlowId);
}

bool isInferencePath(std::string_view path) {
  static constexpr std::array<std::string_view, 6> kPaths{"/v1/completions", "/v1/chat/completions",
                                                          "/v1/embeddings",  "/v1/responses",
                                                          "/v1/rerank",      "/v1/score"};
  for (const std::string_view p : kPaths) {
    if (path == p) return true;
  }
  return false;
}

std::string_view originForm(std::string_view target) {
  const auto lower_is = [](std::string_view s, std::string_view lower) {
    if (s.size() != lower.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i] >= 'A' && s[i] <= 'Z' ? char(s[i] - 'A' + 'a') : s[i];
      if (c != lower[i]) return false;
    }
    return true;
  };
  const std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) return target;
  const std::string_view scheme = target.substr(0, scheme_end);
  if (!lower_is(scheme, "http") && !lower_is(scheme, "https")) return target;
  const std::string_view rest = target.substr(scheme_end + 3);
  const std::size_t path = rest.find('/');
  const std::size_t query = rest.find('?');
  // No path after the authority ("http://host" or "http://host?q"): the root.
  if (path == std::string_view::npos || (query != std::string_view::npos && query < path)) {
    return "/";
  }
  return rest.substr(path);
}

std::string_view requestPath(std::string_view target) {
  std::string_view path = originForm(target);
  if (const auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  return path;
}

std::string errorBody(int status, std::string_view type, std::string_view message) {
  nlohmann::json body = {
      {"error",
       {{"message", std::string(message)}, {"type", std::string(type)}, {"code", status}}}};
  // Replace invalid UTF-8 rather than throw (messages may quote client input).
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Reply replyForOutcome(Outcome outcome, bool poolEmptyNow) {
  const HttpDisposition http = toHttp(outcome, poolEmptyNow);
  Reply reply;
  reply.status = http.status;
  reply.dropReason = std::string(http.dropReason);
  std::string message = "request not admitted by flow control: ";
  message += toString(outcome.kind);
  message += " (";
  message += toString(outcome.cause);
  message += ")";
  const std::string_view type = http.status == 429   ? "rate_limit_exceeded"
                                : http.status == 503 ? "service_unavailable"
                                                     : "internal_error";
  reply.body = errorBody(http.status, type, message);
  return reply;
}

namespace {
constexpr std::string_view kEvictedMessage =
    "evicted: the request was revoked while in progress to make room for higher-priority work "
    "(in-flight eviction); retry later";
}  // namespace

Reply replyForEviction(HttpDisposition disposition) {
  Reply reply;
  reply.status = disposition.status;
  reply.dropReason = std::string(disposition.dropReason);
  reply.body = errorBody(disposition.status, "rate_limit_exceeded", kEvictedMessage);
  return reply;
}

std::string evictionEvent(HttpDisposition disposition) {
  return "data: " + errorBody(disposition.status, "rate_limit_exceeded", kEvictedMessage) + "\n\n";
}

Reply replyForError(int status, std::string_view type, std::string_view message) {
  Reply reply;
  reply.status = status;
  reply.body = errorBody(status, type, message);
  return reply;
}

int retryAfterSeconds(std::size_t queued, double dispatchesPerSecond) {
  const double rate = dispatchesPerSecond > 1.0 ? dispatchesPerSecond : 1.0;
  const double seconds = std::ceil((double(queued) + 1.0) / rate);
  return seconds < 1.0 ? 1 : seconds > 60.0 ? 60 : int(seconds);
}

Reply replyForUpstreamFailure(std::string_view endpoint, std::string_view detail) {
  Reply reply;
  reply.status = 502;
  reply.body = errorBody(502, "bad_gateway",
                         "upstream " + std::string(endpoint) + " failed: " + std::string(detail));
  return reply;
}

Reply replyForBadRequest(std::string_view detail) {
  Reply reply;
  reply.status = 400;
  reply.body = errorBody(400, "invalid_request_error", detail);
  return reply;
}

std::optional<HostPort> parseHostPort(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const auto port = parseInt(text.substr(colon + 1), 0, 65535);
  if (!port) return std::nullopt;
  return HostPort{std::string(text.substr(0, colon)), *port};
}

std::optional<HostPort> parseEndpointUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return std::nullopt;
  url.remove_prefix(kScheme.size());
  if (!url.empty() && url.back() == '/') url.remove_suffix(1);
  if (url.find('/') != std::string_view::npos) return std::nullopt;
  auto hp = parseHostPort(url);
  if (!hp || hp->port == 0) return std::nullopt;
  return hp;
}

void StreamUsageScanner::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (!skipping_) {
      if (partial_.size() + piece.size() > kMaxLineBytes) {
        partial_.clear();
        skipping_ = true;
      } else if (nl != std::string_view::npos && partial_.empty()) {
        line(piece);  // the common case: a whole line within one read, no copy
      } else {
        partial_.append(piece);
        if (nl != std::string_view::npos) {
          line(partial_);
          partial_.clear();
        }
      }
    }
    if (nl == std::string_view::npos) return;
    skipping_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

void StreamUsageScanner::line(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (!text.starts_with("data:")) return;  // blank separators, comments, event:/id: fields
  text.remove_prefix(5);
  if (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  if (text == "[DONE]") return;
  if (text.find("\"usage\"") != std::string_view::npos &&
      !jsonNestingExceeds(text, kMaxJsonNesting)) {
    const auto event = nlohmann::json::parse(text, nullptr, false);
    if (event.is_object()) {
      const auto usage = event.find("usage");
      if (usage != event.end() && usage->is_object()) {
        const auto count = [&](const char* key) -> std::uint64_t {
          const auto it = usage->find(key);
          return it != usage->end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
        };
        exact_ = true;
        prompt_ = count("prompt_tokens");
        completion_ = count("completion_tokens");
        // The usage event of an OpenAI stream has no choices; one that does also carries a token.
        const auto choices = event.find("choices");
        if (choices == event.end() || !choices->is_array() || choices->empty()) return;
      }
    }
  }
  ++events_;
}

}  // namespace holdback::gateway
