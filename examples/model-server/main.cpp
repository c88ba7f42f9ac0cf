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
// The parts: server_options.hpp (flags), openai_api.hpp (request and reply JSON),
// batch_scheduler.hpp (slots, FIFO queue, KV cache), model_server.hpp (timing, counters,
// /metrics), http_front.hpp (Asio/Beast listener and connections).
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
#include <algorithm>
#include <boost/asio.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "http_front.hpp"
#include "model_server.hpp"
#include "server_options.hpp"

int main(int argc, char** argv) {
  using holdback_examples::HttpFront;
  using holdback_examples::ModelServer;
  holdback_examples::ServerOptions options;
  if (auto code = holdback_examples::parseArgs(argc, argv, options)) return *code;
  std::signal(SIGPIPE, SIG_IGN);

  // Connections are coroutines on one single-threaded io_context per I/O thread: --threads of
  // them, at most one per CPU.
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int io_threads = std::min(options.threads, cpus);
  ModelServer model(options);
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts;
  std::vector<boost::asio::io_context*> raw;
  for (int i = 0; i < io_threads; ++i) {
    contexts.push_back(std::make_unique<boost::asio::io_context>(1));
    raw.push_back(contexts.back().get());
  }
  HttpFront front(model, raw);
  const int port = front.listen(options.host, options.port);
  if (port <= 0) return 1;

  // SIGTERM or SIGINT: stop admitting (waiting requests get 503), end running sequences, close
  // the connections, exit 0.
  std::optional<boost::asio::signal_set> signals(std::in_place, *contexts.front(), SIGTERM, SIGINT);
  signals->async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    model.scheduler().stop();
    front.shutdown([&] {
      for (auto& c : contexts) c->stop();
    });
  });
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  for (auto& c : contexts) work.push_back(boost::asio::make_work_guard(*c));
  front.startAccepting();
  if (model.scheduler().poolMode()) {
    boost::asio::co_spawn(*contexts.front(), model.scheduler().runSteps(), boost::asio::detached);
  }

  // The socket is bound and listening: connections are accepted from here on.
  std::printf("listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < contexts.size(); ++i) {
    threads.emplace_back([c = contexts[i].get()] { c->run(); });
  }
  contexts.front()->run();
  for (auto& t : threads) t.join();

  // The connections' coroutines still suspended are destroyed with their io_contexts, before
  // the front and the model they refer to.
  work.clear();
  signals.reset();
  front.releaseIoObjects();
  contexts.clear();
  model.scheduler().stop();
  return 0;
}
