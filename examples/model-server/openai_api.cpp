#include "openai_api.hpp"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

namespace holdback_examples {

namespace {

using nlohmann::json;

std::int64_t estimateTokens(std::string_view text) {
  std::int64_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  const auto quarter = static_cast<std::int64_t>((text.size() + 3) / 4);
  return std::max(words, quarter);
}

// Tokens of an OpenAI "prompt": a string, an array of strings, an array of token ids or an array
// of such arrays. nullopt when the shape is none of these.
std::optional<std::int64_t> promptTokens(const json& prompt) {
  if (prompt.is_string()) return estimateTokens(prompt.get_ref<const std::string&>());
  if (!prompt.is_array()) return std::nullopt;
  std::int64_t total = 0;
  for (const json& part : prompt) {
    if (part.is_number_integer()) {
      total += 1;
    } else if (part.is_string()) {
      total += estimateTokens(part.get_ref<const std::string&>());
    } else if (part.is_array()) {
      auto inner = promptTokens(part);
      if (!inner) return std::nullopt;
      total += *inner;
    } else {
      return std::nullopt;
    }
  }
  return total;
}

// Tokens of chat "messages": each content a string or an array of {"type": "text", "text": ...}.
std::optional<std::int64_t> messageTokens(const json& messages) {
  if (!messages.is_array() || messages.empty()) return std::nullopt;
  std::int64_t total = 0;
  for (const json& m : messages) {
    if (!m.is_object()) return std::nullopt;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) continue;
    if (content->is_string()) {
      total += estimateTokens(content->get_ref<const std::string&>());
    } else if (content->is_array()) {
      for (const json& part : *content) {
        auto text = part.is_object() ? part.find("text") : part.end();
        if (part.is_object() && text != part.end() && text->is_string()) {
          total += estimateTokens(text->get_ref<const std::string&>());
        }
      }
    } else {
      return std::nullopt;
    }
  }
  return total;
}

std::string dumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr std::string_view kWords[] = {" the",  " quick", " brown", " fox", " jumps",
                                       " over", " a",     " lazy",  " dog", "."};

std::string_view tokenText(std::int64_t i) {
  return kWords[static_cast<std::size_t>(i) % std::size(kWords)];
}

json usage(const Generation& g) {
  return {{"prompt_tokens", g.promptTokens},
          {"completion_tokens", g.maxTokens},
          {"total_tokens", g.promptTokens + g.maxTokens}};
}

}  // namespace

// Parses a request body; on error returns the message for a 400.
std::optional<std::string> parseGeneration(const std::string& body, Api api, Generation& g) {
  g.api = api;
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return "the body is not a JSON object";
  std::optional<std::int64_t> prompt;
  if (api == Api::kCompletions) {
    auto it = doc.find("prompt");
    if (it == doc.end()) return "'prompt' is required";
    prompt = promptTokens(*it);
    if (!prompt) return "'prompt' must be a string, an array of strings or of token ids";
  } else {
    auto it = doc.find("messages");
    if (it == doc.end()) return "'messages' is required";
    prompt = messageTokens(*it);
    if (!prompt) return "'messages' must be a non-empty array of {role, content} objects";
  }
  g.promptTokens = std::max<std::int64_t>(1, *prompt);
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    auto it = doc.find(key);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
        it->get<std::int64_t>() > 1000000) {
      return std::string("'") + key + "' must be an integer in [1, 1000000]";
    }
    g.maxTokens = it->get<std::int64_t>();
    break;
  }
  if (auto it = doc.find("stream"); it != doc.end() && !it->is_null()) {
    if (!it->is_boolean()) return "'stream' must be a boolean";
    g.stream = it->get<bool>();
  }
  if (auto it = doc.find("stream_options"); it != doc.end() && it->is_object()) {
    auto usage = it->find("include_usage");
    g.includeUsage = usage != it->end() && usage->is_boolean() && usage->get<bool>();
  }
  return std::nullopt;
}

std::string wholeCompletionBody(const ReplyContext& c, const Generation& g, const std::string& id) {
  std::string text;
  for (std::int64_t i = 0; i < g.maxTokens; ++i) text += tokenText(i);
  json choice = {{"index", 0}, {"finish_reason", "length"}};
  if (g.api == Api::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  json body = {{"id", id},
               {"object", g.api == Api::kChat ? "chat.completion" : "text_completion"},
               {"created", c.created},
               {"model", c.model},
               {"choices", json::array({choice})},
               {"usage", usage(g)}};
  return dumpJson(body);
}

std::string chunkBody(const ReplyContext& c, const Generation& g, const std::string& id,
                      std::int64_t i) {
  const bool last = i + 1 == g.maxTokens;
  json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
  if (g.api == Api::kChat) {
    json delta = {{"content", tokenText(i)}};
    if (i == 0) delta["role"] = "assistant";
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = tokenText(i);
    choice["logprobs"] = nullptr;
  }
  return dumpJson({{"id", id},
                   {"object", g.api == Api::kChat ? "chat.completion.chunk" : "text_completion"},
                   {"created", c.created},
                   {"model", c.model},
                   {"choices", json::array({choice})}});
}

std::string usageChunkBody(const ReplyContext& c, const Generation& g, const std::string& id) {
  return dumpJson({{"id", id},
                   {"object", g.api == Api::kChat ? "chat.completion.chunk" : "text_completion"},
                   {"created", c.created},
                   {"model", c.model},
                   {"choices", json::array()},
                   {"usage", usage(g)}});
}

std::string errorBody(int status, const std::string& message) {
  json err = {{"error",
               {{"message", message},
                {"type", status == 400 ? "BadRequestError" : "ServiceUnavailableError"},
                {"code", status}}}};
  return dumpJson(err);
}

std::string modelsBody(const ReplyContext& c) {
  json m = {{"object", "list"},
            {"data", json::array({{{"id", c.model},
                                   {"object", "model"},
                                   {"created", c.created},
                                   {"owned_by", "holdback"}}})}};
  return dumpJson(m);
}

}  // namespace holdback_examples
