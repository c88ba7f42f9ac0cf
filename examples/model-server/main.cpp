// holdback-model-server: a fake vLLM-like model server for tests and demos (no GPU, no model).
//
//   holdback-model-server [--host 127.0.0.1] [--port 0] [--slots 8] [--token-ms 20]
//                         [--prefill-ms 50] [--kv-capacity-tokens 16384] [--model fake-model]
//                         [--threads 256]
//
// Prints exactly one line, `listening on http://HOST:PORT`, once it accepts connections.
//
// Endpoints
//   POST /v1/completions, POST /v1/chat/completions   OpenAI-shaped, streaming (SSE) or not
//   GET  /metrics                                     Prometheus text, vLLM's metric names
//   GET  /health                                      200
//   GET  /v1/models                                   the one model
//
// Continuous batching (batch_scheduler.hpp): at most --slots sequences run at once, the others
// wait in FIFO order; a sequence also needs prompt tokens + max_tokens of KV cache free out of
// --kv-capacity-tokens. Token i (0-based) of a running sequence is emitted at
// admission + prefill-ms + i * token-ms; every sequence generates exactly max_tokens tokens
// (default 16, finish_reason "length"). Prompt tokens are estimated as
// max(whitespace-separated words, ceil(characters / 4)), at least 1; token-id arrays count their
// elements. A streaming client that disconnects frees its slot at the next token it fails to
// receive; a non-streaming one that disconnects frees it at its next token too (the body is sent
// with its Content-Length when the last token is due). SIGTERM or SIGINT: stop admitting, end
// running sequences, exit 0.
//
// See docs/model-server.md.
#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "batch_scheduler.hpp"
#include "holdback/metrics/prometheus.hpp"

namespace {

using holdback_examples::BatchScheduler;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int slots = 8;
  int tokenMs = 20;
  int prefillMs = 50;
  std::int64_t kvCapacityTokens = 16384;
  std::string model = "fake-model";
  int threads = 256;
  // Misbehaviour for tests: when set, /metrics reports these instead of the real gauges.
  std::optional<double> fakeWaiting;
  std::optional<double> fakeKv;
};

constexpr const char* kUsage =
    "usage: holdback-model-server [--host 127.0.0.1] [--port 0] [--slots 8] [--token-ms 20]\n"
    "                             [--prefill-ms 50] [--kv-capacity-tokens 16384]\n"
    "                             [--model fake-model] [--threads 256]\n"
    "                             [--fake-waiting N] [--fake-kv X]\n"
    "A fake vLLM-like model server: continuous batching over --slots sequences (FIFO queue),\n"
    "one token every --token-ms after --prefill-ms, vLLM metrics on GET /metrics.\n"
    "--threads is the HTTP worker pool (one per open connection; keep it above the number of\n"
    "concurrent requests). Prints `listening on http://HOST:PORT` once it accepts.\n"
    "--fake-waiting / --fake-kv (tests): report these as vllm:num_requests_waiting / the KV usage\n"
    "gauges whatever the real state (e.g. --fake-kv 50: a server reporting percent, not a\n"
    "fraction); requests are still served normally.\n";

template <typename T>
bool parseNumber(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// Returns the exit code for a usage error (2), 0 for --help, or nullopt to go on.
std::optional<int> parseArgs(int argc, char** argv, ServerOptions& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string value;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "holdback-model-server: %s needs a value\n%s", arg.c_str(), kUsage);
      return 2;
    }
    auto positive = [&](auto& field, long long min) {
      if (!parseNumber(value, field) || field < min) {
        std::fprintf(stderr, "holdback-model-server: %s: '%s' is not an integer >= %lld\n",
                     arg.c_str(), value.c_str(), min);
        return false;
      }
      return true;
    };
    bool ok = true;
    if (arg == "--host") {
      o.host = value;
    } else if (arg == "--port") {
      ok = positive(o.port, 0) && o.port <= 65535;
      if (!ok) std::fprintf(stderr, "holdback-model-server: --port must be in [0, 65535]\n");
    } else if (arg == "--slots") {
      ok = positive(o.slots, 1);
    } else if (arg == "--token-ms") {
      ok = positive(o.tokenMs, 0);
    } else if (arg == "--prefill-ms") {
      ok = positive(o.prefillMs, 0);
    } else if (arg == "--kv-capacity-tokens") {
      ok = positive(o.kvCapacityTokens, 1);
    } else if (arg == "--model") {
      o.model = value;
      ok = !value.empty();
      if (!ok) std::fprintf(stderr, "holdback-model-server: --model must not be empty\n");
    } else if (arg == "--threads") {
      // Each is an OS thread started up front; ten million failed to start and aborted.
      ok = positive(o.threads, 1) && o.threads <= 16384;
      if (!ok) std::fprintf(stderr, "holdback-model-server: --threads must be in [1, 16384]\n");
    } else if (arg == "--fake-waiting" || arg == "--fake-kv") {
      double v = 0.0;
      ok = parseNumber(value, v) && v >= 0.0;
      if (!ok) {
        std::fprintf(stderr, "holdback-model-server: %s: '%s' is not a number >= 0\n", arg.c_str(),
                     value.c_str());
      } else {
        (arg == "--fake-waiting" ? o.fakeWaiting : o.fakeKv) = v;
      }
    } else {
      std::fprintf(stderr, "holdback-model-server: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    }
    if (!ok) return 2;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Requests

enum class Api { kCompletions, kChat };

struct Generation {
  Api api = Api::kCompletions;
  std::int64_t promptTokens = 1;
  std::int64_t maxTokens = 16;
  bool stream = false;
  bool includeUsage = false;
};

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

std::string dumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void sendError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  json err = {{"error",
               {{"message", message},
                {"type", status == 400 ? "BadRequestError" : "ServiceUnavailableError"},
                {"code", status}}}};
  res.set_content(dumpJson(err), "application/json");
}

// ---------------------------------------------------------------------------------------------
// Generation

constexpr std::string_view kWords[] = {" the",  " quick", " brown", " fox", " jumps",
                                       " over", " a",     " lazy",  " dog", "."};

std::string_view tokenText(std::int64_t i) {
  return kWords[static_cast<std::size_t>(i) % std::size(kWords)];
}

// Counters for /metrics (vLLM's counters, cumulative since start).
struct Counters {
  std::atomic<std::uint64_t> success{0};
  std::atomic<std::uint64_t> promptTokens{0};
  std::atomic<std::uint64_t> generationTokens{0};
};

class ModelServer {
 public:
  explicit ModelServer(const ServerOptions& o)
      : options_(o),
        scheduler_({.slots = o.slots, .kvCapacityTokens = o.kvCapacityTokens}),
        created_(static_cast<std::int64_t>(std::time(nullptr))) {}

  BatchScheduler& scheduler() { return scheduler_; }

  // The names of the request's header fields, lowercased, in order, comma-separated: a test hook
  // that shows what a proxy in front passed on (reply header x-received-header-names).
  static std::string receivedHeaderNames(const httplib::Request& req) {
    std::string names;
    for (const auto& [name, value] : req.headers) {
      if (name.rfind("REMOTE_", 0) == 0 || name.rfind("LOCAL_", 0) == 0) continue;  // httplib's own
      if (!names.empty()) names += ',';
      for (const char c : name) names += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return names;
  }

  void handleGeneration(const httplib::Request& req, httplib::Response& res, Api api) {
    Generation g;
    if (auto error = parseGeneration(req.body, api, g)) return sendError(res, 400, *error);
    const std::int64_t kv = g.promptTokens + g.maxTokens;
    if (kv > options_.kvCapacityTokens) {
      return sendError(res, 400,
                       "prompt tokens (" + std::to_string(g.promptTokens) + ") + max_tokens (" +
                           std::to_string(g.maxTokens) + ") exceed the KV-cache capacity (" +
                           std::to_string(options_.kvCapacityTokens) + " tokens)");
    }
    auto slot = scheduler_.admit(kv);
    if (!slot) return sendError(res, 503, "the server is shutting down");
    counters_.promptTokens += static_cast<std::uint64_t>(g.promptTokens);
    const auto start = Clock::now();
    const std::string id = (api == Api::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(++ids_);
    res.set_header("x-received-header-names", receivedHeaderNames(req));
    if (g.stream) return stream(res, g, id, start, std::move(*slot));

    // Non-streaming: the tokens are deterministic, so the body (and its Content-Length) is known
    // up front; it is sent once the last token is due. Meanwhile the client is watched
    // (sink.is_writable before every token): one that leaves frees its slot at its next token,
    // as a streaming one does.
    std::string text;
    for (std::int64_t i = 0; i < g.maxTokens; ++i) text += tokenText(i);
    json choice = {{"index", 0}, {"finish_reason", "length"}};
    if (api == Api::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    json body = {{"id", id},
                 {"object", api == Api::kChat ? "chat.completion" : "text_completion"},
                 {"created", created_},
                 {"model", options_.model},
                 {"choices", json::array({choice})},
                 {"usage", usage(g)}};
    auto st = std::make_shared<Whole>(Whole{dumpJson(body), start, g.maxTokens, std::move(*slot)});
    const std::size_t length = st->body.size();
    res.set_content_provider(
        length, "application/json",
        [this, st](std::size_t offset, std::size_t, httplib::DataSink& sink) {
          for (; st->next < st->tokens; ++st->next) {
            if (!sink.is_writable() || !scheduler_.sleepUntil(tokenTime(st->start, st->next))) {
              st->slot.reset();  // the client went away, or shutting down: free the slot now
              return false;
            }
            ++counters_.generationTokens;
          }
          if (st->slot) {
            st->slot.reset();
            ++counters_.success;
          }
          return sink.write(st->body.data() + offset, st->body.size() - offset);
        });
  }

  std::string metrics() const {
    const BatchScheduler::Snapshot s = scheduler_.snapshot();
    using Label = holdback::PrometheusWriter::Label;
    holdback::PrometheusWriter w;
    const auto gauge = [&](std::string_view name, std::string_view help, double value) {
      w.family(name, "gauge", help);
      w.sample(name, {Label{"model_name", options_.model}}, value);
    };
    const auto counter = [&](std::string_view name, std::string_view help, std::uint64_t value,
                             std::initializer_list<Label> labels) {
      w.family(name, "counter", help);
      w.sample(name, labels, value);
    };
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          static_cast<double>(s.running));
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          options_.fakeWaiting.value_or(static_cast<double>(s.waiting)));
    const double kv = options_.fakeKv.value_or(s.kvCacheUsage);
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv);
    gauge("vllm:gpu_cache_usage_perc",
          "GPU KV-cache usage. 1 means 100 percent usage (older name of kv_cache_usage_perc).", kv);
    counter("vllm:request_success_total", "Count of successfully processed requests.",
            counters_.success.load(),
            {Label{"finished_reason", "length"}, Label{"model_name", options_.model}});
    counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
            counters_.promptTokens.load(), {Label{"model_name", options_.model}});
    counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
            counters_.generationTokens.load(), {Label{"model_name", options_.model}});
    return w.take();
  }

  std::string models() const {
    json m = {{"object", "list"},
              {"data", json::array({{{"id", options_.model},
                                     {"object", "model"},
                                     {"created", created_},
                                     {"owned_by", "holdback"}}})}};
    return dumpJson(m);
  }

 private:
  // One streaming response: its slot lives as long as the content provider (a disconnected
  // client makes sink.write fail, the provider returns false and httplib drops the provider).
  struct Stream {
    Generation g;
    std::string id;
    Clock::time_point start;
    std::optional<BatchScheduler::Slot> slot;
    std::int64_t next = 0;
  };

  Clock::time_point tokenTime(Clock::time_point start, std::int64_t i) const {
    return start + std::chrono::milliseconds(options_.prefillMs) +
           std::chrono::milliseconds(options_.tokenMs) * i;
  }

  static json usage(const Generation& g) {
    return {{"prompt_tokens", g.promptTokens},
            {"completion_tokens", g.maxTokens},
            {"total_tokens", g.promptTokens + g.maxTokens}};
  }

  // One non-streaming response (see handleGeneration).
  struct Whole {
    std::string body;
    Clock::time_point start;
    std::int64_t tokens = 0;
    std::optional<BatchScheduler::Slot> slot;
    std::int64_t next = 0;
  };

  json chunk(const Stream& st, std::int64_t i) const {
    const bool last = i + 1 == st.g.maxTokens;
    json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
    if (st.g.api == Api::kChat) {
      json delta = {{"content", tokenText(i)}};
      if (i == 0) delta["role"] = "assistant";
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = tokenText(i);
      choice["logprobs"] = nullptr;
    }
    return {{"id", st.id},
            {"object", st.g.api == Api::kChat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", options_.model},
            {"choices", json::array({choice})}};
  }

  static bool writeEvent(httplib::DataSink& sink, const std::string& data) {
    const std::string event = "data: " + data + "\n\n";
    return sink.write(event.data(), event.size());
  }

  void stream(httplib::Response& res, const Generation& g, const std::string& id,
              Clock::time_point start, BatchScheduler::Slot slot) {
    auto st = std::make_shared<Stream>(Stream{g, id, start, std::move(slot)});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [this, st](std::size_t, httplib::DataSink& sink) {
          // One token per call: sleep until it is due, then send it.
          if (!scheduler_.sleepUntil(tokenTime(st->start, st->next))) {
            st->slot.reset();
            return false;  // shutting down: abort the stream
          }
          if (!writeEvent(sink, dumpJson(chunk(*st, st->next)))) {
            st->slot.reset();  // the client went away: free the slot now
            return false;
          }
          ++counters_.generationTokens;
          if (++st->next < st->g.maxTokens) return true;
          st->slot.reset();
          ++counters_.success;
          if (st->g.includeUsage) {
            json tail = {
                {"id", st->id},
                {"object", st->g.api == Api::kChat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", options_.model},
                {"choices", json::array()},
                {"usage", usage(st->g)}};
            if (!writeEvent(sink, dumpJson(tail))) return false;
          }
          if (!writeEvent(sink, "[DONE]")) return false;
          sink.done();
          return true;
        });
  }

  const ServerOptions options_;
  BatchScheduler scheduler_;
  const std::int64_t created_;
  std::atomic<std::uint64_t> ids_{0};
  Counters counters_;
};

}  // namespace

int main(int argc, char** argv) {
  ServerOptions options;
  if (auto code = parseArgs(argc, argv, options)) return *code;

  // SIGTERM and SIGINT are taken by one thread with sigwait(); every other thread blocks them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ModelServer model(options);
  httplib::Server svr;
  const int threads = options.threads;
  // httplib's default pool has ~8 threads and a queued request holds one: size it so that the
  // FIFO batch queue, not the accept loop, does the waiting.
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_max_count(100000);
  svr.set_keep_alive_timeout(2);  // also bounds how long shutdown waits for idle connections

  svr.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
    model.handleGeneration(req, res, Api::kCompletions);
  });
  svr.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    model.handleGeneration(req, res, Api::kChat);
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(model.metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  svr.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(model.models(), "application/json");
  });

  const int port = options.port == 0
                       ? svr.bind_to_any_port(options.host)
                       : (svr.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0) {
    std::fprintf(stderr, "holdback-model-server: cannot listen on %s:%d\n", options.host.c_str(),
                 options.port);
    return 1;
  }

  std::atomic<bool> signalled{false};
  std::atomic<bool> listen_done{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (listen_done) return;  // woken by main after listen failed
    signalled = true;
    model.scheduler().stop();  // waiting and running sequences end now
    // stop() is a no-op until listen_after_bind() has started: repeat until it has returned.
    while (!listen_done) {
      svr.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  // The socket is bound and listening: connections are accepted from here on.
  std::printf("listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stdout);
  const bool ok = svr.listen_after_bind();
  listen_done = true;

  // Wakes the sigwait thread (SIGTERM is blocked everywhere and only consumed by sigwait).
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread): it does not terminate the thread
  if (!signalled) pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  model.scheduler().stop();
  return signalled || ok ? 0 : 1;
}
