// The OpenAI-compatible surface of the fake model server: what a request asks for (parsed from
// the body of POST /v1/completions or /v1/chat/completions) and the JSON of every reply (a whole
// completion, a streamed chunk, the usage chunk, an error, the model list). No networking.
//
// Thread safety: thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace holdback_examples {

enum class Api { kCompletions, kChat };

struct Generation {
  Api api = Api::kCompletions;
  std::int64_t promptTokens = 1;
  std::int64_t maxTokens = 16;
  bool stream = false;
  bool includeUsage = false;
};

// Parses a request body; on error returns the message for a 400. Prompt tokens are estimated as
// max(whitespace-separated words, ceil(characters / 4)) per string, at least 1; token-id arrays
// count their elements.
std::optional<std::string> parseGeneration(const std::string& body, Api api, Generation& g);

// What every reply names: the model and the server's start time (`created`).
struct ReplyContext {
  std::string model;
  std::int64_t created = 0;
};

// The non-streamed reply: every token's text, finish_reason "length", and the usage.
std::string wholeCompletionBody(const ReplyContext& c, const Generation& g, const std::string& id);

// The data of streamed event `i` (0-based) of a generation of g.maxTokens tokens.
std::string chunkBody(const ReplyContext& c, const Generation& g, const std::string& id,
                      std::int64_t i);

// The data of the final usage event (stream_options.include_usage).
std::string usageChunkBody(const ReplyContext& c, const Generation& g, const std::string& id);

// {"error": {"message", "type", "code"}}: BadRequestError for 400, else ServiceUnavailableError.
std::string errorBody(int status, const std::string& message);

// GET /v1/models: the one model.
std::string modelsBody(const ReplyContext& c);

}  // namespace holdback_examples
