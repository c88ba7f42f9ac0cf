// holdback-gateway: an OpenAI-style HTTP gateway that puts every request through a
// FlowController before proxying it to the least-loaded model server. The worked example of
// docs/guide/gateway.md (how it embeds holdback: docs/guide/embedding.md). This file only wires
// the parts together:
//
//   options.hpp          the command line
//   gateway.hpp          shared state: config, pool, controller, dispatch driver, counters
//   dispatcher.hpp       runs the controller's dispatch cycles, idle when nothing is queued
//   pool.hpp             telemetry, in-flight counts, the endpoint choice (EndpointSource)
//   scraper.hpp          one coroutine per model server reading its /metrics
//   upstream.hpp         pooled keep-alive model-server connections and the proxy exchange
//   http_server.hpp      listener, per-connection coroutine, routes, the request path
//   metrics_endpoint.hpp GET /metrics
//   gateway_http.hpp     headers, error bodies, outcome -> status (no networking)
//
// Prints exactly one line "listening on http://HOST:PORT" to stdout once it accepts connections
// (with --admin-listen, "admin listening on http://HOST:PORT" just before it); everything else
// goes to stderr. SIGTERM/SIGINT: stop accepting, shut the controller down (queued requests are
// answered 503 rejected-shutting-down), let the responses in progress finish (at most
// --drain-timeout-s), exit 0. SIGHUP, with --api-keys: reload the key file (a bad one is
// reported and the previous table kept); without --api-keys SIGHUP is not handled.
#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <atomic>
#include <csignal>
#include <cstdio>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "endpoint_dialect.hpp"
#include "gateway.hpp"
#include "http_server.hpp"
#include "net.hpp"
#include "options.hpp"
#include "replica_input.hpp"
#include "replica_reserve_redis.hpp"
#include "replica_sync_redis.hpp"
#include "scraper.hpp"
#include "tenants.hpp"

namespace holdback::gateway {
namespace {

// glibc's malloc gives freed memory back to the kernel as soon as 128 KiB are free at the top of a
// heap, and takes it back (brk, or mprotect in the I/O threads' arenas) on the next allocations:
// with hundreds of requests in flight, every burst of completions and arrivals paid system calls
// for it. Up to 64 MiB per arena stay with the process (it is reused by the next requests), and
// heaps grow 1 MiB at a time. Blocks over 1 MiB are mmapped (the threshold no longer adapts).
void keepFreedHeap() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_TOP_PAD, 1 << 20);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

// Thousands of connections need thousands of descriptors: raise the soft limit to the hard one.
void raiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// SIGHUP: the key file again; installed when it is valid, else reported and the previous table
// kept (requests go on being checked against it).
void reloadKeys(Gateway& gateway, const Options& options) {
  TenantDirectory& tenants = gateway.tenants();
  auto table = TenantTable::load(options.apiKeysFile, options.objectives);
  if (!table) {
    tenants.reloadsFailed.fetch_add(1, std::memory_order_relaxed);
    const auto current = tenants.current();
    std::fprintf(stderr,
                 "holdback-gateway: SIGHUP: --api-keys %s: %s\nholdback-gateway: SIGHUP: kept "
                 "the previous keys (%zu tenants, %zu keys)\n",
                 options.apiKeysFile.c_str(), table.diagnostics().toString().c_str(),
                 current ? current->tenants().size() : std::size_t{0},
                 current ? current->keys() : std::size_t{0});
    return;
  }
  const std::size_t n_tenants = table->tenants().size();
  const std::size_t n_keys = table->keys();
  tenants.install(std::move(table).value());
  tenants.reloadsOk.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "holdback-gateway: SIGHUP: reloaded --api-keys %s: %zu tenants, %zu keys\n",
               options.apiKeysFile.c_str(), n_tenants, n_keys);
}

int run(int argc, char** argv) {
  Options options;
  if (const int rc = parseArgs(argc, argv, options); rc != 0) return rc == 2 ? 0 : 2;
#ifndef HOLDBACK_GATEWAY_HIREDIS
  if (options.replicaSync.port != 0) {
    std::fprintf(stderr,
                 "holdback-gateway: --replica-sync: built without hiredis (Debian "
                 "libhiredis-dev); rebuild with it installed\n");
    return 2;
  }
#endif
  std::vector<std::string> dialect_errors;
  const DialectChoices dialects = resolveDialects(options, dialect_errors);
  for (const std::string& e : dialect_errors)
    std::fprintf(stderr, "holdback-gateway: %s\n", e.c_str());
  if (!dialect_errors.empty()) return 2;

  // The config's text is read once: loaded, and hashed into the replicas' config fingerprint.
  const std::optional<std::string> config_text =
      options.configFile.empty() ? std::optional<std::string>(std::string(kDefaultConfigText))
                                 : config::readTextFile(options.configFile);
  const config::BundleResult loaded =
      config_text ? config::loadEndpointPickerConfigText(*config_text)
                  : config::loadEndpointPickerConfigFile(options.configFile);  // says why
  const char* config_name =
      options.configFile.empty() ? "built-in config" : options.configFile.c_str();
  if (!loaded) {
    std::fprintf(stderr, "holdback-gateway: %s: %s\n", config_name,
                 loaded.diagnostics().toString().c_str());
    return 2;
  }
  if (!loaded.diagnostics().empty()) {
    std::fprintf(stderr, "holdback-gateway: %s: %s\n", config_name,
                 loaded.diagnostics().toString().c_str());
  }
  // --api-keys: the tenants and their keys (tenants.hpp), refused whole when anything is wrong.
  std::optional<TenantTable> keys;
  if (!options.apiKeysFile.empty()) {
    auto table = TenantTable::load(options.apiKeysFile, options.objectives);
    if (!table) {
      std::fprintf(stderr, "holdback-gateway: --api-keys %s: %s\n", options.apiKeysFile.c_str(),
                   table.diagnostics().toString().c_str());
      return 2;
    }
    keys = std::move(table).value();
    if (!options.adminListen) {
      std::fprintf(stderr,
                   "holdback-gateway: warning: --api-keys without --admin-listen: /metrics and "
                   "/debug/program-aware-fairness (which name tenants and model servers) are "
                   "served on the public listener to any tenant's key; set --admin-listen\n");
    }
  }
  raiseFileLimit();
  keepFreedHeap();

  // Signals are taken synchronously by the main thread (sigwait); every thread started from here
  // on inherits the blocked mask. SIGHUP only with --api-keys (it reloads the key file).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (keys) sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // One io_context per I/O thread.
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio::io_context*> raw;
  for (int i = 0; i < options.threads; ++i) {
    contexts.push_back(std::make_unique<asio::io_context>(1));
    raw.push_back(contexts.back().get());
  }

  // Resolve the model servers once.
  std::vector<tcp::endpoint> targets;
  {
    tcp::resolver resolver(*raw.front());
    for (const HostPort& hp : options.endpoints) {
      beast::error_code ec;
      const auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
      if (ec || results.empty()) {
        std::fprintf(stderr, "holdback-gateway: cannot resolve %s: %s\n", hp.host.c_str(),
                     ec.message().c_str());
        return 2;
      }
      targets.push_back(*results.begin());
    }
  }

  auto gateway = std::make_unique<Gateway>(options, loaded.value());
  if (keys) {
    gateway->tenants().enable();
    gateway->tenants().install(std::move(*keys));
    keys.reset();
  }
  if (!gateway->start()) return 2;
  auto server = std::make_unique<HttpServer>(*gateway, raw, targets);
  const int port = server->listen(options.listen);
  const int admin_port = options.adminListen ? server->listenAdmin(*options.adminListen) : -1;
  if (port == 0 || admin_port == 0) {
    gateway->shutdownController();
    return 1;
  }

  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  work.reserve(raw.size());
  for (asio::io_context* c : raw) work.push_back(asio::make_work_guard(*c));
  std::vector<std::thread> threads;
  threads.reserve(raw.size());
  for (asio::io_context* c : raw) threads.emplace_back([c] { c->run(); });

  // One scrape of every model server before accepting traffic, so that the first requests are
  // not held back by "no metrics yet" (bounded by the 1 s scrape timeouts).
  // A configured dialect naming metrics a reachable server lacks is a start-up error (the
  // scraper printed each with its flag and the names the server exposes).
  std::latch first_round(std::ptrdiff_t(targets.size()));
  std::atomic<bool> mapping_failed{false};
  for (std::size_t i = 0; i < targets.size(); ++i) {
    startScraper(raw.front()->get_executor(), *gateway, i, targets[i], dialects.forEndpoint(i),
                 [&first_round, &mapping_failed](const std::vector<std::string>& errors) {
                   if (!errors.empty()) mapping_failed = true;
                   first_round.count_down();
                 });
  }
  first_round.wait();

  // --replica-sync: share this replica's pending dispatches through Redis (a background thread).
  // And, unless --replica-feed off, every dispatch, completion and arrival as it happens (the
  // replica feed: replica_feed.hpp). Destroyed after the coroutines (their dispatches hold it).
  std::unique_ptr<ReplicaFeed> replica_feed;
  std::unique_ptr<ReplicaSyncThread> replica_sync;
  std::unique_ptr<ReplicaReserver> replica_reserve;  // --replica-mode reserve
  if (options.replicaSync.port != 0 && !mapping_failed) {
#ifdef HOLDBACK_GATEWAY_HIREDIS
    // Replicas share only with those of the same config and model servers: the fingerprint,
    // published with their figures, and by default the key prefix (replica_input.hpp).
    RedisStore store{
        options.replicaSync, options.replicaSyncPrefix,
        configFingerprint(config_text ? *config_text : std::string(), options.endpointUrls)};
    if (store.prefix.empty()) store.prefix = defaultKeyPrefix(store.fingerprint);
    if (options.replicaFeed) {
      replica_feed = ReplicaFeed::start(store, options.endpointUrls, gateway->pool(),
                                        gateway->controller().replicaPort(), gateway->counters());
      gateway->pool().setFeed(replica_feed.get());
    }
    replica_sync = ReplicaSyncThread::start(store, options.endpointUrls, gateway->pool(),
                                            gateway->controller().replicaPort(),
                                            gateway->counters(), options.replicaSyncIntervalMs,
                                            options.replicaSyncTtlMs, replica_feed.get());
    if (options.replicaReserve) {
      gateway->counters().replicaReserveMode = true;
      replica_reserve = startReplicaReserver(store, options.endpointUrls, *gateway,
                                             options.replicaSyncIntervalMs, options.replicaLeaseMs);
      gateway->setReserver(replica_reserve.get());
    }
#endif
  }

  int received = 0;
  if (!mapping_failed) {
    server->startAccepting();
    if (options.adminListen) {
      std::printf("admin listening on http://%s:%d\n", options.adminListen->host.c_str(),
                  admin_port);
    }
    std::printf("listening on http://%s:%d\n", options.listen.host.c_str(), port);
    std::fflush(stdout);
    while (sigwait(&signals, &received) == 0 && received == SIGHUP) {
      reloadKeys(*gateway, options);
    }
    std::fprintf(stderr, "holdback-gateway: %s: shutting down\n",
                 received == SIGINT ? "SIGINT" : "SIGTERM");
  }
  server->stopAccepting();
  gateway->shutdownController();  // queued requests: 503 rejected-shutting-down
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(options.drainTimeoutS);
  while (gateway->counters().exchangesInProgress.load() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  replica_sync.reset();
  // No delivery to a request's I/O thread once the threads stop (its bookings still release).
  gateway->setReserver(nullptr);
  if (replica_reserve) replica_reserve->shutdown();
  for (asio::io_context* c : raw) c->stop();
  for (std::thread& t : threads) t.join();
  work.clear();
  server->releaseIoObjects();
  contexts.clear();  // destroys the parked coroutines (and their sockets)
  server.reset();
  replica_reserve.reset();  // after the coroutines: their dispatches release bookings to it
  replica_feed.reset();
  gateway.reset();
  return mapping_failed ? 2 : 0;
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
