// The gateway's command line: every flag, its default, and the parser. Copy this file when you
// need the same flags in your own proxy.
//
// Thread safety: thread-compatible (Options is a plain value; parseArgs is a pure function apart
// from printing usage and errors).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway_http.hpp"

namespace holdback::gateway {

// --replica-sync redis://[[USER]:PASSWORD@]HOST:PORT[/DB] (replica_sync_redis.hpp).
struct RedisUrl {
  std::string host;
  int port = 0;          // 0: replica sync off
  std::string user;      // with the password: AUTH USER PASSWORD (Redis 6 ACL users)
  std::string password;  // empty: no AUTH; else AUTH [USER] PASSWORD on every connection
  int db = 0;            // not 0: SELECT DB on every connection
  // "HOST:PORT", and "/DB" when not 0, and " (AUTH as USER)" or " (AUTH)": what logs show.
  // Never the password.
  [[nodiscard]] std::string describe() const;
};
// `text` as a RedisUrl (USER and PASSWORD may be %-encoded, as %40 for '@'); nullopt with
// `error` saying what is wrong (never the password) otherwise.
[[nodiscard]] std::optional<RedisUrl> parseRedisUrl(std::string_view text, std::string& error);
// `text` with the password of a redis:// URL replaced by "***", for messages about it.
[[nodiscard]] std::string redactRedisUrl(std::string_view text);

struct Options {
  std::vector<std::string> endpointUrls;  // "http://HOST:PORT", no trailing "/"
  std::vector<HostPort> endpoints;        // parsed, same order
  // Slot counts (capacity.hpp): --endpoint URL,slots=N per endpoint (same order, 0 = not given)
  // and --endpoint-slots N for every endpoint without one (0 = not given).
  std::vector<std::int64_t> endpointSlots;
  std::int64_t poolSlots = 0;
  std::string configFile;  // empty: the built-in config
  HostPort listen{"127.0.0.1", 0};
  int scrapeIntervalMs = 50;
  ObjectiveTable objectives = ObjectiveTable::builtin();
  std::vector<std::string> models;  // --model: served by GET /v1/models instead of aggregating

  // Event loop and connection limits.
  int threads = 2;              // I/O threads (one io_context each)
  int maxConnections = 10000;   // open client connections; beyond it: 503 + close
  int headerTimeoutMs = 10000;  // from the first byte of a request to the end of its header
  int bodyTimeoutMs = 30000;    // to read the body once the header is in
  int idleTimeoutS = 60;        // a kept-alive connection with no request
  std::size_t maxHeaderBytes = std::size_t{16} * 1024;
  std::size_t maxBodyBytes = std::size_t{4} * 1024 * 1024;
  // Overload protection (overload.hpp): the bytes of request bodies and collected responses held
  // at once (0: defaultMaxBufferedBytes(), a quarter of the memory), beyond which new requests
  // get 503; one non-streamed response's largest body (larger: 502); open connections per client
  // address (beyond: 503 + close).
  std::size_t maxBufferedBytes = 0;
  std::size_t maxResponseBytes = std::size_t{64} * 1024 * 1024;
  int maxConnectionsPerClient = 1024;

  // Upstream.
  int upstreamTimeoutS = 300;  // per read or write towards a model server
  int upstreamConnectMs = 2000;
  int upstreamMaxIdle = 64;   // idle kept-alive connections per model server per I/O thread
  int upstreamIdleMs = 1500;  // an idle upstream connection older than this is closed
  std::size_t maxScrapeBytes =
      std::size_t{1024} * 1024;  // a larger /metrics body is a failed scrape
  int drainTimeoutS = 30;        // SIGTERM: how long responses in progress may take

  // Open connections per model server per I/O thread (upstream.hpp); beyond it: 503.
  int upstreamMaxConnections = 4096;
  // Replica sync (replica_sync_redis.hpp): --replica-sync redis://...; port 0: off.
  RedisUrl replicaSync;
  // --replica-sync-prefix: what every Redis key and channel of the replicas starts with; empty:
  // "holdback:" and a hash of the config and the model servers (replica_input.hpp).
  std::string replicaSyncPrefix;
  // How often this replica publishes its pending work and reads the others'.
  int replicaSyncIntervalMs = 20;
  // With --replica-sync: the replica feed over the same Redis (replica_feed.hpp).
  bool replicaFeed = true;
  // A replica's published share expires this long after its last publication.
  int replicaSyncTtlMs = 1000;
  // --replica-mode reserve: every dispatch books its slot and KV tokens in Redis
  // (replica_reserve.hpp); false: share (the figures every interval and the feed only).
  bool replicaReserve = false;
  // --replica-lease-ms: a replica's bookings outlive its last heartbeat by at most this; 0: the
  // default, 10 x --replica-sync-interval-ms (at least 100 ms).
  int replicaLeaseMs = 0;
  // Metric dialects (endpoint_dialect.hpp, docs/guide/engines.md).
  std::string dialect = "auto";  // --dialect: auto (detect), custom or a built-in dialect
  std::vector<std::pair<std::string, std::string>> endpointDialects;  // --endpoint-dialect URL=D
  std::string dialectFile;  // --dialect-file: custom dialects (metric_dialect_config.hpp)
  std::vector<std::pair<std::string, std::string>> metricSpecs;  // (--metric-* flag, SPEC)
  // --api-keys FILE: tenants and their keys (tenants.hpp); empty: no authentication, the
  // objective and fairness headers are trusted.
  std::string apiKeysFile;
  // --admin-listen HOST:PORT: /metrics, /debug/..., /readyz and /healthz on their own listener
  // (the public one then serves only the API and /healthz); nullopt: everything on --listen.
  std::optional<HostPort> adminListen;
};

// Returns 0 to go on, 1 for a usage error (printed), 2 for "printed what was asked, exit 0".
int parseArgs(int argc, char** argv, Options& o);

}  // namespace holdback::gateway
