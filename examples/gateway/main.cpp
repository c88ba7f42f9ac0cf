// holdback-gateway: an OpenAI-style HTTP gateway that puts every request through a
// FlowController before proxying it to the least-loaded model server. The worked example of
// docs/gateway.md.
//
//   holdback-gateway --endpoint http://127.0.0.1:P1 [--endpoint ...] [--config FILE]
//                    [--listen 127.0.0.1:0] [--scrape-interval-ms 50]
//                    [--objective NAME=PRIORITY ...] [--max-connections 512]
//                    [--upstream-timeout-s 300] [--no-scrape-lag-credit]
//   holdback-gateway --print-default-config
//
// Prints exactly one line "listening on http://HOST:PORT" to stdout once it accepts connections;
// everything else goes to stderr. SIGTERM/SIGINT: stop accepting, shut the controller down
// (queued requests are answered 503 rejected-shutting-down), let in-flight responses finish, exit
// 0.
//
// The request path (POST /v1/completions, /v1/chat/completions):
//   1. priority from x-gateway-inference-objective (ObjectiveTable), flow id from
//      x-gateway-inference-fairness-id (gateway_http.hpp);
//   2. enqueue in the FlowController; the handler thread waits on its Pending. The controller's
//      runner thread dispatches; the outcome callback picks the endpoint (Pool::pick) right then,
//      so the next dispatch decision already sees the in-flight increment;
//   3. not dispatched -> the reference's status and drop reason; dispatched -> proxied, the
//      upstream response streamed back through a bridge thread (status and headers first, then
//      every chunk as it arrives). An upstream that fails before its response head -> 502.
//   While queued, the handler polls its client socket; a client that hung up cancels its ticket.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <csignal>

#include <httplib.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway_http.hpp"
#include "holdback/config/endpoint_picker_config.hpp"
#include "holdback/detector/detectors.hpp"
#include "holdback/flow/flow_controller.hpp"
#include "pool.hpp"
#include "prometheus_text.hpp"

namespace holdback::gateway {
namespace {

using namespace std::chrono_literals;

struct Options {
  std::vector<std::string> endpointUrls;
  std::vector<HostPort> endpoints;
  std::string configFile;
  HostPort listen{"127.0.0.1", 0};
  int scrapeIntervalMs = 50;
  ObjectiveTable objectives = ObjectiveTable::builtin();
  int maxConnections = 512;
  int upstreamTimeoutS = 300;
  bool scrapeLagCredit = true;
};

constexpr const char* kUsage =
    "usage: holdback-gateway --endpoint http://HOST:PORT [--endpoint ...] [--config FILE]\n"
    "         [--listen HOST:PORT (127.0.0.1:0)] [--scrape-interval-ms N (50)]\n"
    "         [--objective NAME=PRIORITY ... (interactive=10, batch=-1)]\n"
    "         [--max-connections N (512)] [--upstream-timeout-s N (300)]\n"
    "         [--no-scrape-lag-credit]\n"
    "       holdback-gateway --print-default-config\n";

std::optional<int> positiveInt(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// Returns 0 to go on, 1 for a usage error, 2 for "printed what was asked, exit 0".
int parseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::optional<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "holdback-gateway: %s needs a value\n", arg.c_str());
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    auto intOption = [&](int& out) {
      const auto v = next();
      if (!v) return false;
      const auto n = positiveInt(*v);
      if (!n) {
        std::fprintf(stderr, "holdback-gateway: %s: \"%s\" is not a positive integer\n",
                     arg.c_str(), v->c_str());
        return false;
      }
      out = *n;
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 2;
    } else if (arg == "--print-default-config") {
      std::fwrite(kDefaultConfigText.data(), 1, kDefaultConfigText.size(), stdout);
      return 2;
    } else if (arg == "--endpoint") {
      const auto v = next();
      if (!v) return 1;
      const auto hp = parseEndpointUrl(*v);
      if (!hp) {
        std::fprintf(
            stderr, "holdback-gateway: --endpoint: \"%s\" is not http://HOST:PORT (port 1-65535)\n",
            v->c_str());
        return 1;
      }
      std::string url = *v;
      if (url.back() == '/') url.pop_back();
      o.endpointUrls.push_back(url);
      o.endpoints.push_back(*hp);
    } else if (arg == "--config") {
      const auto v = next();
      if (!v) return 1;
      o.configFile = *v;
    } else if (arg == "--listen") {
      const auto v = next();
      if (!v) return 1;
      const auto hp = parseHostPort(*v);
      if (!hp) {
        std::fprintf(stderr, "holdback-gateway: --listen: \"%s\" is not HOST:PORT\n", v->c_str());
        return 1;
      }
      o.listen = *hp;
    } else if (arg == "--objective") {
      const auto v = next();
      if (!v) return 1;
      std::string error;
      if (!o.objectives.set(*v, &error)) {
        std::fprintf(stderr, "holdback-gateway: --objective: %s\n", error.c_str());
        return 1;
      }
    } else if (arg == "--scrape-interval-ms") {
      if (!intOption(o.scrapeIntervalMs)) return 1;
    } else if (arg == "--max-connections") {
      if (!intOption(o.maxConnections)) return 1;
    } else if (arg == "--upstream-timeout-s") {
      if (!intOption(o.upstreamTimeoutS)) return 1;
    } else if (arg == "--no-scrape-lag-credit" && !has_value) {
      o.scrapeLagCredit = false;
    } else {
      std::fprintf(stderr, "holdback-gateway: unknown argument \"%s\"\n%s", argv[i], kUsage);
      return 1;
    }
  }
  if (o.endpoints.empty()) {
    std::fprintf(stderr, "holdback-gateway: at least one --endpoint is required\n%s", kUsage);
    return 1;
  }
  return 0;
}

// --- client-disconnect detection ------------------------------------------------------------
// cpp-httplib 0.11 does not expose a request's socket, so the handler finds it once by matching
// the request's local and remote addresses against the process's sockets, then polls it for a
// peer hang-up (POLLRDHUP). The socket stays open (and so keeps its number) while the handler runs.

std::optional<std::pair<std::string, int>> socketAddress(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return std::nullopt;
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return std::make_pair(std::string(buf), int(ntohs(in->sin_port)));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return std::make_pair(std::string(buf), int(ntohs(in6->sin6_port)));
  }
  return std::nullopt;
}

int findClientSocket(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    int fd = -1;
    const std::string_view name = entry->d_name;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec != std::errc() || end != name.data() + name.size() || fd == dirfd(dir)) continue;
    const auto local = socketAddress(fd, false);
    if (!local || local->second != req.local_port) continue;
    const auto remote = socketAddress(fd, true);
    if (remote && remote->second == req.remote_port && remote->first == req.remote_addr) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool peerHungUp(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// --- the gateway ----------------------------------------------------------------------------

// One request's rendezvous with the flow controller: the outcome callback fills it, the handler
// thread waits on it. Thread safety: thread-safe (every field is guarded by mu).
struct Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Outcome outcome;
  std::optional<std::size_t> endpoint;
  Duration queued{};
};

// Hands the upstream response from the bridge thread to the handler thread. Thread safety:
// thread-safe (every field but `thread` is guarded by mu; `thread` is joined by the handler side).
struct Bridge {
  std::mutex mu;
  std::condition_variable cv;
  bool head = false;  // status and content type are set
  int status = 0;
  std::string contentType;
  std::deque<std::string> chunks;
  bool finished = false;  // the upstream exchange ended
  bool failed = false;    // ... with an error (error says which)
  std::string error;
  bool cancelled = false;  // the client went away: stop reading the upstream
  std::thread thread;
};

bool isHopByHop(const std::string& name) {
  static constexpr std::array<std::string_view, 13> kSkip{
      "host",        "connection",        "keep-alive", "proxy-connection", "te",
      "trailer",     "transfer-encoding", "upgrade",    "content-length",   "remote_addr",
      "remote_port", "local_addr",        "local_port"};
  std::string lower(name);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string_view s : kSkip) {
    if (lower == s) return true;
  }
  return false;
}

std::string formatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// The server's state: config bundle, pool, controller, scrapers, counters; routes() installs the
// handlers. Thread safety: thread-safe (handlers run concurrently on the server's threads; start()
// and the shutdown calls are made by the main thread).
class Gateway {
 public:
  Gateway(Options options, std::shared_ptr<const config::ConfigBundle> bundle)
      : options_(std::move(options)), bundle_(std::move(bundle)) {}

  ~Gateway() { stopScrapers(); }

  bool start() {
    pool_ =
        std::make_shared<Pool>(options_.endpointUrls, options_.endpoints, options_.scrapeLagCredit);
    detector_ = bundle_->controller.detector;
    FlowControllerOptions fc = bundle_->controller;
    fc.endpoints = pool_;
    fc.onOutcome = [this](Completion&& c) { onOutcome(std::move(c)); };
    fc.runner.enabled = true;
    fc.runner.tickInterval = 1ms;
    auto created = FlowController::create(std::move(fc));
    if (!created) {
      std::fprintf(stderr, "holdback-gateway: %s\n", created.diagnostics().toString().c_str());
      return false;
    }
    controller_ = std::move(created).value();
    warnAboutStaleness();
    startScrapers();
    return true;
  }

  void routes(httplib::Server& svr) {
    auto completions = [this](const httplib::Request& req, httplib::Response& res) {
      handleCompletion(req, res);
    };
    svr.Post("/v1/completions", completions);
    svr.Post("/v1/chat/completions", completions);
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(renderMetrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
    svr.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok", "text/plain");
    });
  }

  // Queued requests are answered 503 rejected-shutting-down; later ones are rejected the same way.
  void shutdownController() { controller_->shutdown(); }
  void stopScrapers() {
    {
      std::lock_guard lock(scrape_mu_);
      stop_scraping_ = true;
    }
    scrape_cv_.notify_all();
    for (std::thread& t : scrapers_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void warnAboutStaleness() const {
    if (!bundle_->flowControlEnabled) {
      std::fprintf(stderr,
                   "holdback-gateway: warning: feature gate flowControl is off: requests are not "
                   "queued; priority < 0 is rejected 429 when saturation >= 1.0 (legacy mode)\n");
    }
    const auto* u = dynamic_cast<const UtilizationDetector*>(detector_.get());
    if (!u) return;
    const Duration threshold = u->options().metricsStalenessThreshold;
    const Duration interval = std::chrono::milliseconds(options_.scrapeIntervalMs);
    if (interval >= threshold) {
      std::fprintf(stderr,
                   "holdback-gateway: warning: scrape interval %d ms >= metricsStalenessThreshold "
                   "%lld ms: the detector will see stale metrics most of the time and (with "
                   "stalenessPolicy saturated) hold back traffic (upstream issue #2514); make the "
                   "threshold several scrape intervals long\n",
                   options_.scrapeIntervalMs,
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(threshold).count()));
    }
  }

  // --- telemetry ---

  void startScrapers() {
    for (std::size_t i = 0; i < pool_->size(); ++i) {
      scrapers_.emplace_back([this, i] {
        httplib::Client client(pool_->host(i).host, pool_->host(i).port);
        client.set_keep_alive(true);
        client.set_connection_timeout(1, 0);
        client.set_read_timeout(1, 0);
        client.set_write_timeout(1, 0);
        bool first = true;
        auto next = Clock::now();
        for (;;) {
          scrapeOnce(i, client);
          if (first) {
            first = false;
            std::lock_guard lock(scrape_mu_);
            ++first_round_;
            scrape_cv_.notify_all();
          }
          next += std::chrono::milliseconds(options_.scrapeIntervalMs);
          const auto now = Clock::now();
          if (next < now) next = now;  // fell behind (slow endpoint): no catch-up burst
          std::unique_lock lock(scrape_mu_);
          if (scrape_cv_.wait_until(lock, next, [this] { return stop_scraping_; })) return;
        }
      });
    }
    // One scrape of every endpoint before accepting traffic, so that the first requests are not
    // held back by "no metrics yet" (bounded by the 1 s scrape timeouts).
    std::unique_lock lock(scrape_mu_);
    scrape_cv_.wait(lock, [&] { return first_round_ == pool_->size(); });
  }

  void scrapeOnce(std::size_t i, httplib::Client& client) {
    const std::uint64_t dispatches_before = pool_->dispatchCount(i);
    auto result = client.Get("/metrics");
    if (!result || result->status != 200) {
      pool_->recordScrapeFailure(i);
      return;
    }
    const ParsedMetrics parsed = parsePrometheusText(result->body);
    const auto telemetry = extractVllmTelemetry(parsed);
    if (!telemetry) {
      pool_->recordScrapeFailure(i);
      return;
    }
    pool_->recordScrape(i, *telemetry, Clock::now(), dispatches_before, parsed.skippedLines);
  }

  // --- the request path ---

  void count(int status) {
    if (status >= 0 && status < int(responses_.size())) {
      responses_[std::size_t(status)].fetch_add(1, std::memory_order_relaxed);
    }
  }

  void reply(httplib::Response& res, const Reply& r) {
    res.status = r.status;
    if (!r.dropReason.empty()) res.set_header(std::string(kDropReasonHeader), r.dropReason);
    res.set_content(r.body, "application/json");
    count(r.status);
  }

  void onOutcome(Completion&& c) {
    auto* holder = std::any_cast<std::shared_ptr<Pending>>(&c.payload);
    if (holder == nullptr || !*holder) return;
    Pending& p = **holder;
    std::optional<std::size_t> endpoint;
    if (c.outcome.dispatched()) endpoint = pool_->pick(*detector_, c.finalizedAt);
    {
      std::lock_guard lock(p.mu);
      p.done = true;
      p.outcome = c.outcome;
      p.endpoint = endpoint;
      p.queued = c.finalizedAt - c.enqueueTime;
    }
    p.cv.notify_all();
  }

  void handleCompletion(const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      reply(res, replyForBadRequest("the request body is not a JSON object"));
      return;
    }
    const Priority priority =
        options_.objectives.priorityOf(req.get_header_value(std::string(kObjectiveHeader)));
    std::string flow = flowIdFrom(req.get_header_value(std::string(kFairnessIdHeader)),
                                  req.get_header_value(std::string(kFairnessIdHeaderAlias)));

    if (!bundle_->flowControlEnabled) {
      handleLegacy(req, res, priority, body);
      return;
    }

    auto pending = std::make_shared<Pending>();
    FlowRequest request;
    request.flowId = std::move(flow);
    request.priority = priority;
    request.sizeBytes = req.body.size();
    request.payload = pending;
    Ticket ticket = controller_->enqueue(std::move(request));

    int client_fd = -2;  // -2: not looked up yet, -1: not found
    {
      std::unique_lock lock(pending->mu);
      while (!pending->cv.wait_for(lock, 20ms, [&] { return pending->done; })) {
        lock.unlock();
        if (client_fd == -2) client_fd = findClientSocket(req);
        if (client_fd >= 0 && peerHungUp(client_fd)) (void)ticket.cancel();
        lock.lock();
      }
    }
    if (!pending->outcome.dispatched() || !pending->endpoint) {
      const bool pool_empty = controller_->poolRegime().empty;
      reply(res, pending->outcome.dispatched()
                     ? replyForOutcome(
                           {QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints}, true)
                     : replyForOutcome(pending->outcome, pool_empty));
      return;
    }
    if (client_fd >= 0 && peerHungUp(client_fd)) {
      // Dispatched just as the client went away: do not spend a model-server slot on it.
      pool_->release(*pending->endpoint);
      reply(res,
            replyForOutcome({QueueOutcome::kEvictedCancelled, OutcomeCause::kCancelled}, false));
      return;
    }
    const auto queued_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(pending->queued).count();
    proxy(req, res, *pending->endpoint, queued_ms, wantsStream(body));
  }

  // Flow control gate off: the reference admits everything at once, except that priority < 0 is
  // rejected 429 while the pool is saturated.
  void handleLegacy(const httplib::Request& req, httplib::Response& res, Priority priority,
                    const nlohmann::json& body) {
    std::vector<Endpoint> snapshot;
    pool_->snapshot(snapshot);
    const TimePoint now = Clock::now();
    if (priority < 0 && detector_->saturation(snapshot, now) >= 1.0) {
      reply(res, Reply{429, "",
                       errorBody(429, "rate_limit_exceeded",
                                 "system saturated, sheddable request dropped")});
      return;
    }
    const auto endpoint = pool_->pick(*detector_, now);
    if (!endpoint) {
      reply(res, replyForOutcome({QueueOutcome::kRejectedNoEndpoints, OutcomeCause::kNoEndpoints},
                                 true));
      return;
    }
    proxy(req, res, *endpoint, 0, wantsStream(body));
  }

  static bool wantsStream(const nlohmann::json& body) {
    const auto it = body.find("stream");
    return it != body.end() && it->is_boolean() && it->get<bool>();
  }

  // Sends the request to endpoint `index` on a bridge thread. `stream`: the answer is streamed
  // back chunk by chunk as it arrives (chunked transfer encoding); otherwise it is collected and
  // sent with a Content-Length (and an upstream failure mid-body is still a 502). The endpoint's
  // in-flight count (taken by pick) is released when the upstream exchange ends.
  void proxy(const httplib::Request& req, httplib::Response& res, std::size_t index,
             long long queued_ms, bool stream) {
    auto bridge = std::make_shared<Bridge>();
    httplib::Headers headers;
    for (const auto& [name, value] : req.headers) {
      if (!isHopByHop(name)) headers.emplace(name, value);
    }
    const HostPort target = pool_->host(index);
    const int timeout_s = options_.upstreamTimeoutS;
    bridge->thread = std::thread([this, bridge, index, target, timeout_s, path = req.path,
                                  body = req.body, headers = std::move(headers)]() mutable {
      httplib::Client client(target.host, target.port);
      client.set_connection_timeout(2, 0);
      client.set_read_timeout(timeout_s, 0);
      client.set_write_timeout(timeout_s, 0);
      httplib::Request up;
      up.method = "POST";
      up.path = path;
      up.headers = std::move(headers);
      up.body = std::move(body);
      if (!up.has_header("Content-Type")) up.set_header("Content-Type", "application/json");
      up.response_handler = [&bridge](const httplib::Response& r) {
        std::lock_guard lock(bridge->mu);
        bridge->status = r.status;
        bridge->contentType = r.get_header_value("Content-Type");
        bridge->head = true;
        bridge->cv.notify_all();
        return !bridge->cancelled;
      };
      up.content_receiver = [&bridge](const char* data, std::size_t n, std::uint64_t,
                                      std::uint64_t) {
        std::lock_guard lock(bridge->mu);
        if (bridge->cancelled) return false;
        bridge->chunks.emplace_back(data, n);
        bridge->cv.notify_all();
        return true;
      };
      httplib::Response response;
      httplib::Error error = httplib::Error::Success;
      const bool ok = client.send(up, response, error);
      pool_->release(index);
      std::lock_guard lock(bridge->mu);
      bridge->finished = true;
      if (!ok && !bridge->cancelled) {
        bridge->failed = true;
        bridge->error = httplib::to_string(error);
      }
      bridge->cv.notify_all();
    });

    {
      std::unique_lock lock(bridge->mu);
      bridge->cv.wait(lock, [&] { return (stream && bridge->head) || bridge->finished; });
      if (!bridge->head || (!stream && bridge->failed)) {
        const std::string error = bridge->failed ? bridge->error : "no response";
        lock.unlock();
        bridge->thread.join();
        upstream_failures_.fetch_add(1, std::memory_order_relaxed);
        res.set_header(std::string(kEndpointHeader), pool_->url(index));
        reply(res, replyForUpstreamFailure(pool_->url(index), error));
        return;
      }
      res.status = bridge->status;
    }
    res.set_header(std::string(kEndpointHeader), pool_->url(index));
    res.set_header(std::string(kQueuedMsHeader), std::to_string(queued_ms));
    count(res.status);
    const std::string content_type =
        bridge->contentType.empty() ? "application/json" : bridge->contentType;
    if (!stream) {
      bridge->thread.join();
      std::string whole;
      for (const std::string& chunk : bridge->chunks) whole += chunk;
      res.set_content(whole, content_type);  // httplib 0.11 copies either way
      return;
    }
    res.set_chunked_content_provider(
        content_type,
        [bridge, this](std::size_t, httplib::DataSink& sink) {
          std::unique_lock lock(bridge->mu);
          bridge->cv.wait(lock, [&] { return !bridge->chunks.empty() || bridge->finished; });
          if (!bridge->chunks.empty()) {
            std::string chunk = std::move(bridge->chunks.front());
            bridge->chunks.pop_front();
            lock.unlock();
            if (!sink.write(chunk.data(), chunk.size())) {
              std::lock_guard relock(bridge->mu);
              bridge->cancelled = true;
              return false;
            }
            return true;
          }
          if (bridge->failed) {
            // The head was already sent: all the client can be told is a truncated body.
            upstream_failures_.fetch_add(1, std::memory_order_relaxed);
            return false;
          }
          lock.unlock();
          sink.done();
          return true;
        },
        [bridge](bool) {
          {
            std::lock_guard lock(bridge->mu);
            bridge->cancelled = true;
          }
          if (bridge->thread.joinable()) bridge->thread.join();
        });
  }

  // --- /metrics ---

  std::string renderMetrics() {
    std::string out = renderPrometheus(controller_->stats(), "default");
    std::vector<Endpoint> snapshot;
    pool_->snapshot(snapshot);
    const TimePoint now = Clock::now();
    const auto* utilization = dynamic_cast<const UtilizationDetector*>(detector_.get());

    auto family = [&out](const char* name, const char* type, const char* help) {
      out.append("# HELP ").append(name).append(" ").append(help);
      out.append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
    };
    auto sample = [&out](const char* name, const std::string& labels, double value) {
      out.append(name).append(labels.empty() ? "" : "{" + labels + "}");
      out.append(" ").append(formatNumber(value)).append("\n");
    };
    auto endpointLabel = [&](std::size_t i) {
      std::string v;
      for (const char c : pool_->url(i)) {
        if (c == '\\' || c == '"') v += '\\';
        v += c;
      }
      return "endpoint=\"" + v + "\"";
    };

    family("holdback_gateway_responses_total", "counter",
           "Responses to completion requests, by HTTP status code.");
    for (std::size_t code = 0; code < responses_.size(); ++code) {
      const std::uint64_t n = responses_[code].load(std::memory_order_relaxed);
      if (n > 0)
        sample("holdback_gateway_responses_total", "code=\"" + std::to_string(code) + "\"",
               double(n));
    }
    family("holdback_gateway_upstream_failures_total", "counter",
           "Proxied requests whose upstream failed (502 before the response head, or a truncated "
           "body after it).");
    sample("holdback_gateway_upstream_failures_total", "",
           double(upstream_failures_.load(std::memory_order_relaxed)));
    family("holdback_gateway_pool_saturation", "gauge",
           "Pool saturation as the configured detector computes it now.");
    sample("holdback_gateway_pool_saturation", "", detector_->saturation(snapshot, now));

    std::vector<Pool::Counters> counters;
    for (std::size_t i = 0; i < pool_->size(); ++i) counters.push_back(pool_->counters(i));
    struct PerEndpoint {
      const char* name;
      const char* type;
      const char* help;
      double (*value)(const Pool::Counters&, const Endpoint&, double age, bool stale);
    };
    static constexpr PerEndpoint kPerEndpoint[] = {
        {"holdback_gateway_scrapes_total", "counter", "Scrapes of the endpoint's /metrics.",
         [](const Pool::Counters& c, const Endpoint&, double, bool) { return double(c.scrapes); }},
        {"holdback_gateway_scrape_errors_total", "counter",
         "Failed scrapes (unreachable, non-200, or vLLM gauges missing).",
         [](const Pool::Counters& c, const Endpoint&, double, bool) {
           return double(c.scrapeErrors);
         }},
        {"holdback_gateway_scrape_skipped_lines_total", "counter",
         "Malformed lines skipped while parsing the endpoint's metrics.",
         [](const Pool::Counters& c, const Endpoint&, double, bool) {
           return double(c.skippedLines);
         }},
        {"holdback_gateway_endpoint_up", "gauge", "1 when the last scrape succeeded.",
         [](const Pool::Counters& c, const Endpoint&, double, bool) { return c.up ? 1.0 : 0.0; }},
        {"holdback_gateway_endpoint_stale", "gauge",
         "1 when the detector treats the endpoint's metrics as stale or invalid.",
         [](const Pool::Counters&, const Endpoint&, double, bool stale) {
           return stale ? 1.0 : 0.0;
         }},
        {"holdback_gateway_endpoint_metrics_age_seconds", "gauge",
         "Seconds since the last successful scrape (+Inf: never).",
         [](const Pool::Counters&, const Endpoint&, double age, bool) { return age; }},
        {"holdback_gateway_endpoint_in_flight_requests", "gauge",
         "Requests the gateway has proxied to the endpoint and not yet seen finish.",
         [](const Pool::Counters&, const Endpoint& e, double, bool) {
           return double(e.inFlightRequests);
         }},
        {"holdback_gateway_endpoint_waiting_requests", "gauge",
         "The waiting queue the detector sees (scraped, plus the scrape-lag credit).",
         [](const Pool::Counters&, const Endpoint& e, double, bool) { return e.waitingQueueSize; }},
        {"holdback_gateway_endpoint_kv_cache_usage", "gauge", "Scraped KV-cache usage (0..1).",
         [](const Pool::Counters&, const Endpoint& e, double, bool) { return e.kvCacheUsage; }},
        {"holdback_gateway_endpoint_dispatches_total", "counter",
         "Requests dispatched to the endpoint.",
         [](const Pool::Counters& c, const Endpoint&, double, bool) {
           return double(c.dispatches);
         }},
    };
    for (const PerEndpoint& m : kPerEndpoint) {
      family(m.name, m.type, m.help);
      for (std::size_t i = 0; i < pool_->size(); ++i) {
        const Pool::Counters& c = counters[i];
        const double age = c.updateTime ? std::chrono::duration<double>(now - *c.updateTime).count()
                                        : std::numeric_limits<double>::infinity();
        const bool stale = utilization != nullptr ? utilization->observe(snapshot[i], now) !=
                                                        UtilizationDetector::Observation::kFresh
                                                  : !c.up;
        sample(m.name, endpointLabel(i), m.value(c, snapshot[i], age, stale));
      }
    }
    return out;
  }

  Options options_;
  std::shared_ptr<const config::ConfigBundle> bundle_;
  std::shared_ptr<Pool> pool_;
  std::shared_ptr<const SaturationDetector> detector_;
  std::unique_ptr<FlowController> controller_;

  std::array<std::atomic<std::uint64_t>, 600> responses_{};
  std::atomic<std::uint64_t> upstream_failures_{0};

  std::mutex scrape_mu_;
  std::condition_variable scrape_cv_;
  bool stop_scraping_ = false;   // guarded by scrape_mu_
  std::size_t first_round_ = 0;  // scrapers done with their first scrape; guarded by scrape_mu_
  std::vector<std::thread> scrapers_;
};

int run(int argc, char** argv) {
  Options options;
  if (const int rc = parseArgs(argc, argv, options); rc != 0) return rc == 2 ? 0 : 2;

  const config::BundleResult loaded =
      options.configFile.empty() ? config::loadEndpointPickerConfigText(kDefaultConfigText)
                                 : config::loadEndpointPickerConfigFile(options.configFile);
  if (!loaded) {
    std::fprintf(stderr, "holdback-gateway: %s: %s\n",
                 options.configFile.empty() ? "built-in config" : options.configFile.c_str(),
                 loaded.diagnostics().toString().c_str());
    return 2;
  }
  if (!loaded.diagnostics().empty()) {
    std::fprintf(stderr, "holdback-gateway: %s: %s\n",
                 options.configFile.empty() ? "built-in config" : options.configFile.c_str(),
                 loaded.diagnostics().toString().c_str());
  }

  // Signals are taken synchronously by the main thread (sigwait); every thread started from here
  // on inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Gateway gateway(options, loaded.value());
  if (!gateway.start()) return 2;

  httplib::Server server;
  // Queued requests hold a server thread each while they wait in holdback: with httplib's default
  // pool (a handful of threads) interactive requests would queue at accept level instead.
  const std::size_t threads = std::size_t(options.maxConnections);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(1000);
  gateway.routes(server);

  int port = options.listen.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.listen.host);
    if (port < 0) port = 0;
  } else if (!server.bind_to_port(options.listen.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::fprintf(stderr, "holdback-gateway: cannot listen on %s:%d\n", options.listen.host.c_str(),
                 options.listen.port);
    gateway.shutdownController();
    return 1;
  }
  std::thread listener([&server] { server.listen_after_bind(); });
  std::printf("listening on http://%s:%d\n", options.listen.host.c_str(), port);
  std::fflush(stdout);

  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "holdback-gateway: %s: shutting down\n",
               received == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();                 // stop accepting
  gateway.shutdownController();  // queued requests: 503 rejected-shutting-down
  listener.join();               // in-flight handlers finish (streams drain)
  gateway.stopScrapers();
  return 0;
}

}  // namespace
}  // namespace holdback::gateway

int main(int argc, char** argv) {
  try {
    return holdback::gateway::run(argc, argv);
  } catch (const std::exception& e) {  // e.g. a thread that cannot be started
    std::fprintf(stderr, "holdback-gateway: %s\n", e.what());
    return 1;
  }
}
