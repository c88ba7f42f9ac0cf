// The HTTP/1.1 front of the fake model server, on Boost.Asio/Beast with C++20 coroutines: the
// listener (backlog max_listen_connections, so that bursts of connects are not dropped) and one
// coroutine per connection on a small set of single-threaded io_contexts (connections are handed
// out round robin; no thread per connection).
//
// Endpoints
//   POST /v1/completions, POST /v1/chat/completions   OpenAI-shaped, streaming (SSE) or not
//   GET  /metrics                                     Prometheus text, vLLM's metric names
//   GET  /health                                      200
//   GET  /v1/models                                   the one model
//   anything else                                     404
// GET routes answer HEAD too. Every completion reply carries x-received-header-names.
//
// Per connection: TCP_NODELAY, keep-alive; a connection idle for 2 s is closed, a request must
// arrive whole within 5 s of its first byte, a write may take 5 s. A malformed request gets 400
// and the connection closes. A completion waits for its slot (FIFO, BatchScheduler) and then:
//   streaming: the head at once (chunked, text/event-stream), one `data:` event per token when
//     it is due, the usage event if asked for, `data: [DONE]`;
//   not streaming: the head (with its Content-Length) at once, the body when the last token is
//     due.
// Before each token the client is checked (a non-blocking MSG_PEEK): one that went away frees
// its slot there, and the connection closes.
//
// Thread safety: listen() and startAccepting() on the main thread before the I/O threads run;
// shutdown() from any thread; each connection lives on one io_context's thread.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model_server.hpp"

namespace holdback_examples {

class HttpFront {
 public:
  // `contexts`: one per I/O thread, not owned; the first also runs the listener.
  HttpFront(ModelServer& model, std::vector<boost::asio::io_context*> contexts);
  ~HttpFront();

  // Resolves `host` and binds host:port (0: any free port); the bound port, or -1 with the reason
  // printed to stderr.
  int listen(const std::string& host, int port);
  void startAccepting();

  // Stops accepting; connections end after their current exchange (idle ones within 2 s).
  // `done` runs on the first context once every connection is closed, or after 3 s.
  void shutdown(std::function<void()> done);

  // With the I/O threads stopped, before the io_contexts are destroyed: closes the listener.
  void releaseIoObjects();

 private:
  class Connection;

  ModelServer& model_;
  std::vector<boost::asio::io_context*> contexts_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::atomic<int> open_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace holdback_examples
