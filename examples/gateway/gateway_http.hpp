// The gateway's HTTP conventions, kept apart from the server so that they can be unit-tested:
// request headers -> priority and flow id, flow-control outcome -> HTTP reply, upstream failure ->
// HTTP reply, and command-line values.
//
// Request headers (the Go gateway's conventions):
//   x-gateway-inference-objective: NAME     the InferenceObjective; its priority comes from the
//                                           objective table (--objective NAME=PRIORITY; built-in
//                                           interactive=10, batch=-1). Missing or unknown -> 0.
//   x-gateway-inference-fairness-id: ID     the flow (fairness key); alias
//                                           x-llm-d-inference-fairness-id; default "default-flow".
//   x-llm-d-slo-ttft-ms: MS                 the TTFT objective (alias x-slo-ttft-ms; the new name
//                                           wins) for slo-deadline-ordering-policy; junk or
//                                           overflowing values mean none, as upstream.
//   x-llm-d-inference-ttl: DURATION         the request's queue budget (Go duration, "1500ms");
//                                           the smallest of it, its band's and the default TTL
//                                           wins; not a positive duration -> 400.
// A response's served tokens are reported to every program-aware-fairness policy of the config
// as the program's: a non-streamed body's "usage" (prompt_tokens, completion_tokens), a stream's
// usage event, or for a stream without one an estimate (StreamUsageScanner).
// Replies that are not proxied carry an OpenAI-style JSON error body
//   {"error": {"message": ..., "type": ..., "code": STATUS}}
// and, for flow-control drops, the header x-llm-d-request-dropped-reason (holdback::toHttp).
//
// Thread safety: thread-safe (pure functions; ObjectiveTable is immutable once built).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "holdback/core/text.hpp"
#include "holdback/detector/saturation_detector.hpp"
#include "holdback/flow/outcome.hpp"
#include "holdback/policy/usage_limit_policy.hpp"

namespace holdback::gateway {

inline constexpr std::string_view kObjectiveHeader = "x-gateway-inference-objective";
inline constexpr std::string_view kFairnessIdHeader = "x-gateway-inference-fairness-id";
inline constexpr std::string_view kFairnessIdHeaderAlias = "x-llm-d-inference-fairness-id";
inline constexpr std::string_view kDropReasonHeader = "x-llm-d-request-dropped-reason";
inline constexpr std::string_view kEndpointHeader = "x-holdback-endpoint";
inline constexpr std::string_view kQueuedMsHeader = "x-holdback-queued-ms";
inline constexpr std::string_view kDefaultFlowId = "default-flow";

// The tokens served by a streamed (server-sent events) completion, read from the bytes relayed
// to the client, for program-aware-fairness:
//   - exact when the stream carries a usage event (the client asked for one with
//     stream_options.include_usage): its prompt_tokens and completion_tokens;
//   - otherwise an estimate: one completion token per content event (`data: {...}` other than
//     [DONE]; vLLM and the example model server stream one token per event), and the prompt as
//     the request body's bytes / 4 (a common rule of thumb for English text).
// Events may be split anywhere across feed() calls; a line longer than kMaxLineBytes is skipped.
// JSON is parsed only for an event that mentions "usage". Thread safety: thread-compatible.
class StreamUsageScanner {
 public:
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
  static constexpr std::uint64_t kPromptBytesPerToken = 4;

  void feed(std::string_view bytes);
  // True once a content event or a usage event has been seen.
  [[nodiscard]] bool known() const noexcept { return exact_ || events_ > 0; }
  // True when the figures come from the stream's usage event.
  [[nodiscard]] bool exact() const noexcept { return exact_; }
  [[nodiscard]] std::uint64_t promptTokens(std::uint64_t requestBodyBytes) const noexcept {
    return exact_ ? prompt_ : requestBodyBytes / kPromptBytesPerToken;
  }
  [[nodiscard]] std::uint64_t completionTokens() const noexcept {
    return exact_ ? completion_ : events_;
  }
  [[nodiscard]] std::uint64_t contentEvents() const noexcept { return events_; }

 private:
  void line(std::string_view text);

  std::string partial_;
  bool skipping_ = false;  // inside a line longer than kMaxLineBytes
  std::uint64_t events_ = 0;
  bool exact_ = false;
  std::uint64_t prompt_ = 0;
  std::uint64_t completion_ = 0;
};

// Objective name -> priority.
class ObjectiveTable {
 public:
  // interactive=10, batch=-1.
  static ObjectiveTable builtin();
  // Parses "NAME=PRIORITY" (NAME non-empty, PRIORITY a 32-bit integer) and sets it, replacing a
  // previous value; false (table unchanged, `error` says why) on a malformed spec.
  bool set(std::string_view spec, std::string* error = nullptr);
  // The objective's priority; 0 for a missing (empty) or unknown objective.
  [[nodiscard]] Priority priorityOf(std::string_view objective) const;
  [[nodiscard]] const std::map<std::string, Priority, std::less<>>& entries() const {
    return entries_;
  }

 private:
  std::map<std::string, Priority, std::less<>> entries_;
};

// The flow id from the two header values (empty = absent): primary, else alias, else
// "default-flow".
[[nodiscard]] std::string flowIdFrom(std::string_view primary, std::string_view alias);

// The inference paths: POST requests with a JSON object body that go through flow control and
// are proxied to a model server. vLLM's OpenAI-compatible ones: /v1/completions,
// /v1/chat/completions, /v1/embeddings, /v1/responses, /v1/rerank, /v1/score (path without the
// query; exact match).
[[nodiscard]] bool isInferencePath(std::string_view path);

// The origin form (path and query) of a request target. A target in absolute form
// ("http://host:port/v1/completions?x", which RFC 9112 section 3.2.2 requires a server to
// accept) loses its scheme and authority ("/v1/completions?x"; "/" when nothing follows the
// authority, its query dropped then); any other target is returned unchanged. The scheme is matched
// case-insensitively.
[[nodiscard]] std::string_view originForm(std::string_view target);
// The path of a request target (its origin form without the query): what routing matches.
[[nodiscard]] std::string_view requestPath(std::string_view target);

// A reply the gateway writes itself.
struct Reply {
  int status = 500;
  std::string dropReason;       // empty: no drop-reason header
  std::string body;             // JSON
  int retryAfterS = 0;          // > 0: a Retry-After header (seconds)
  std::string wwwAuthenticate;  // non-empty: a WWW-Authenticate header (401)
};

// Any error the gateway answers itself, with the OpenAI-style body.
[[nodiscard]] Reply replyForError(int status, std::string_view type, std::string_view message);

// Retry-After for "too much traffic" (429) derived from the queue state: the time the queue ahead
// of a new request takes to drain at the recent dispatch rate,
//   ceil((queued + 1) / max(dispatchesPerSecond, 1)), clamped to [1, 60] seconds.
[[nodiscard]] int retryAfterSeconds(std::size_t queued, double dispatchesPerSecond);

// A flow-control outcome that did not dispatch -> the reference's status and drop reason
// (holdback::toHttp) with a JSON error body naming the outcome. For kDispatched this returns
// status 200 and is not used by the gateway.
[[nodiscard]] Reply replyForOutcome(Outcome outcome, bool poolEmptyNow);

// A dispatched request revoked by in-flight eviction (docs/guide/eviction.md): `disposition`'s
// status and drop reason (kEvictedHttp: 429 "evicted"), an OpenAI-style body saying why.
[[nodiscard]] Reply replyForEviction(HttpDisposition disposition);
// The same error as one server-sent event, for a stream whose head was already sent:
// "data: {\"error\": {...}}\n\n".
[[nodiscard]] std::string evictionEvent(HttpDisposition disposition);

// The upstream could not be reached or failed before its response head arrived: 502, no drop
// reason, `detail` (e.g. "Connection") in the message.
[[nodiscard]] Reply replyForUpstreamFailure(std::string_view endpoint, std::string_view detail);

// What the gateway needs of a completion request's body, read without building a JSON document:
// whether it is one JSON object (anything else is a 400), whether its top-level "stream" is
// true (a streamed response), and its KV footprint (FlowRequest::kvTokens):
//   promptTokens  an estimate: max(words, ceil(bytes / 4)) per string under the top-level
//                 "prompt" or "messages", plus one per token id (an integer in a "prompt" array)
//   maxTokens     the top-level "max_tokens" or "max_completion_tokens" when a positive integer
//                 (the last one written), else 0
//   kvTokens()    promptTokens + maxTokens, or + kDefaultMaxTokens without one (the completions
//                 API's default; a chat request without a limit declares at least that much)
// A body that nests arrays and objects deeper than kMaxJsonNesting (holdback/core/text.hpp) is
// not an object for this scan (tooDeep says why): the gateway refuses it with 400 before anything
// walks it recursively.
struct CompletionBody {
  static constexpr std::int64_t kDefaultMaxTokens = 16;
  bool object = false;
  bool tooDeep = false;
  bool stream = false;
  std::int64_t promptTokens = 0;
  std::int64_t maxTokens = 0;
  [[nodiscard]] std::int64_t kvTokens() const noexcept {
    const std::int64_t out = maxTokens > 0 ? maxTokens : kDefaultMaxTokens;
    return promptTokens > INT64_MAX - out ? INT64_MAX : promptTokens + out;
  }
};
[[nodiscard]] CompletionBody scanCompletionBody(std::string_view body);

// A non-streamed response's "usage": its "prompt_tokens" and "completion_tokens", read in one pass
// (no document is built) under the same nesting limit. nullopt when the body is not one JSON
// object with a "usage" object, or nests deeper than kMaxJsonNesting. A count that is not a
// non-negative integer is 0; of duplicate keys the last one counts, as in a parsed document.
struct ResponseUsage {
  std::uint64_t promptTokens = 0;
  std::uint64_t completionTokens = 0;
};
[[nodiscard]] std::optional<ResponseUsage> scanResponseUsage(std::string_view body);

// A fairness id names a flow in the controller, in /metrics (a label value) and in /debug: at
// most kMaxFairnessIdBytes of valid UTF-8 without control characters. checkFairnessId() says
// what is wrong with `id` (the request is then refused with 400), or nullopt when it is fine.
inline constexpr std::size_t kMaxFairnessIdBytes = 256;
[[nodiscard]] std::optional<std::string> checkFairnessId(std::string_view id);

// A request the gateway cannot parse: 400.
[[nodiscard]] Reply replyForBadRequest(std::string_view detail);

// The OpenAI-style error body.
[[nodiscard]] std::string errorBody(int status, std::string_view type, std::string_view message);

// The configuration used without --config (docs/guide/gateway.md, "The default configuration"): the
// library's recommended configuration (examples/configs/recommended.yaml) sized for the gateway's
// small pools: the reservation holdback policy counting room on the endpoints (capacityModel:
// endpoints, from the slots and KV capacity the gateway learns, capacity.hpp), reserve
// restoration by in-flight eviction, and the vLLM utilization detector. The gateway routes with
// the fitFirst EndpointPicker and declares each request's KV footprint. The previous built-in
// (stepwise holdback) is examples/configs/stepwise-gateway.yaml.
inline constexpr std::string_view kDefaultConfigText =
    R"(# holdback-gateway's built-in configuration: the recommended configuration
# (examples/configs/recommended.yaml, docs/guide/policies.md "The recommended configuration") with a
# reserve sized for small pools (docs/guide/gateway.md, "The default configuration").
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
  - name: vllm-utilization
    type: utilization-detector
    parameters:
      queueDepthThreshold: 5
      kvCacheUtilThreshold: 0.8
      metricsStalenessThreshold: 1s
      stalenessPolicy: saturated
  - name: reservation
    type: reservation-holdback-policy
    parameters:
      epsilon: 0.01
      # Small pools: no floor (the detector has no slot term, so a slot-bound pool reads
      # saturation ~0 and a floor of 0.5 would never hold batch), and a fixed reserve of one
      # protected request's room that restoration keeps (the Poisson sizing asks for an infinite
      # reserve when a steady interactive stream outruns a small pool's turnover). With
      # restoration on the policy does not hold its reserve up: restoration repairs it.
      minCeiling: 0.0
      decayTime: 1500ms
      minReserve: 1
      poissonSizing: false
      capacityModel: endpoints
flowControl:
  usageLimitPolicyPluginRef: reservation
  saturationDetector: {pluginRef: vllm-utilization}
  defaultRequestTTL: 30s
  enableEviction: true
  eviction:
    revokeOnBlock: false
    restoreReserve: {enabled: true}
  priorityBands:
    - {priority: 10}
    - {priority: 0}
    - {priority: -1}
)";
// "HOST:PORT" -> host and port (0..65535); nullopt when malformed.
struct HostPort {
  std::string host;
  int port = 0;
};
[[nodiscard]] std::optional<HostPort> parseHostPort(std::string_view text);
// "http://HOST:PORT" (an optional trailing "/") -> host and port; nullopt otherwise.
[[nodiscard]] std::optional<HostPort> parseEndpointUrl(std::string_view url);

}  // namespace holdback::gateway
