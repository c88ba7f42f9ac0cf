#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>

#include "replica_input.hpp"

namespace holdback::gateway {
namespace {

constexpr const char* kUsage =
    "usage: holdback-gateway --endpoint http://HOST:PORT[,slots=N] [--endpoint ...] [--config "
    "FILE]\n"
    "         [--endpoint-slots N (estimated from the scrapes)]\n"
    "         [--listen HOST:PORT (127.0.0.1:0)] [--scrape-interval-ms N (50)]\n"
    "         [--objective NAME=PRIORITY ... (interactive=10, batch=-1)] [--model NAME ...]\n"
    "         [--threads N (2)] [--max-connections N (10000)]\n"
    "         [--header-timeout-ms N (10000)] [--body-timeout-ms N (30000)]\n"
    "         [--idle-timeout-s N (60)] [--max-header-bytes N (16384)]\n"
    "         [--max-body-bytes N (4194304)] [--max-buffered-bytes N (RAM / 4)]\n"
    "         [--max-response-bytes N (67108864)] [--max-connections-per-client N (1024)]\n"
    "         [--upstream-timeout-s N (300)]\n"
    "         [--upstream-connect-ms N (2000)] [--upstream-max-idle N (64)]\n"
    "         [--upstream-idle-ms N (1500)] [--max-scrape-bytes N (1048576)]\n"
    "         [--drain-timeout-s N (30)] [--no-scrape-lag-credit (deprecated, no-op)]\n"
    "         [--upstream-max-connections N (4096)]\n"
    "         [--replica-sync redis://[[USER]:PASSWORD@]HOST:PORT[/DB]]\n"
    "         [--replica-sync-prefix NAME (holdback:<hash of the config and endpoints>:)]\n"
    "         [--replica-sync-interval-ms N (20)] [--replica-sync-ttl-ms N (1000)]\n"
    "         [--replica-feed on|off (on)] [--replica-mode share|reserve (share)]\n"
    "         [--replica-lease-ms N (10 x the sync interval, at least 100)]\n"
    "         [--dialect auto|custom|vllm|vllm-v0|sglang|llamacpp|tgi|trtllm (auto)]\n"
    "         [--endpoint-dialect URL=DIALECT ...] [--metric-waiting SPEC]\n"
    "         [--metric-running SPEC] [--metric-kv-usage SPEC]\n"
    "         [--metric-kv-capacity-tokens SPEC] [--metric-slots SPEC]\n"
    "         [--dialect-file FILE] (docs/guide/engines.md)\n"
    "         [--api-keys FILE] (tenants and their keys, SIGHUP reloads it; without it the\n"
    "          objective and fairness headers are trusted: docs/guide/gateway.md)\n"
    "         [--admin-listen HOST:PORT] (/metrics, /debug, /readyz on their own listener)\n"
    "       holdback-gateway --print-default-config\n";

// A positive integer of type T; nullopt when `s` is not one. `tooLarge` is set when `s` is a
// positive integer that T cannot hold.
template <typename T>
std::optional<T> positive(std::string_view s, bool& tooLarge) {
  T v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  tooLarge = ec == std::errc::result_out_of_range && end == s.data() + s.size() && !s.empty() &&
             s.front() != '-';
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// A slot count "PREFIX N": N a non-negative integer up to 2^32 - 1. 0 is taken (with a
// warning) as not given: the next source of the slot count applies (capacity.hpp). nullopt
// (reported) for anything else.
std::optional<std::int64_t> slotCount(const std::string& where, std::string_view text,
                                      std::string_view prefix) {
  constexpr std::int64_t kMax = 0xFFFFFFFF;
  std::int64_t n = -1;
  const bool prefixed = text.substr(0, prefix.size()) == prefix;
  const std::string_view digits = prefixed ? text.substr(prefix.size()) : std::string_view{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (!prefixed || digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      n < 0 || n > kMax) {
    std::fprintf(stderr,
                 "holdback-gateway: %s: \"%.*s\" is not %.*sN with N an integer in [1, %lld]\n",
                 where.c_str(), static_cast<int>(text.size()), text.data(),
                 static_cast<int>(prefix.size()), prefix.data(), static_cast<long long>(kMax));
    return std::nullopt;
  }
  if (n == 0) {
    std::fprintf(stderr,
                 "holdback-gateway: warning: %s: 0 slots would admit nothing; ignored (the slot "
                 "count comes from the next source: --endpoint-slots, the config's "
                 "maxRunningRequests, else the scrapes' estimate)\n",
                 where.c_str());
  }
  return n;
}

// %XX decoded; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percentDecoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned v = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    const auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, v, 16);
    if (ec != std::errc() || end != text.data() + i + 3) return std::nullopt;
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

// --replica-lease-ms: at most 10 minutes (a dead replica's bookings hold its slots that long).
constexpr unsigned long long kMaxLeaseMs = 600000;

// --replica-mode and --replica-lease-ms together (the lease is checked against the interval);
// fills in the default lease. False (printed) when they do not fit.
bool checkReplicaMode(Options& o) {
  bool ok = true;
  if (o.replicaReserve && o.replicaSync.port == 0) {
    std::fprintf(stderr,
                 "holdback-gateway: --replica-mode reserve: needs --replica-sync redis://...: the "
                 "bookings are kept in Redis\n");
    ok = false;
  }
  if (o.replicaLeaseMs == 0) {
    o.replicaLeaseMs = static_cast<int>(
        std::min<long long>(kMaxLeaseMs, std::max<long long>(100, 10LL * o.replicaSyncIntervalMs)));
  } else if (o.replicaLeaseMs < 2LL * o.replicaSyncIntervalMs || o.replicaLeaseMs < 50) {
    std::fprintf(stderr,
                 "holdback-gateway: --replica-lease-ms: %d is below %lld: the lease must be at "
                 "least 50 ms and 2 x --replica-sync-interval-ms (%d), since every replica renews "
                 "its heartbeat once per interval (allowed: that to %llu)\n",
                 o.replicaLeaseMs, std::max(50LL, 2LL * o.replicaSyncIntervalMs),
                 o.replicaSyncIntervalMs, kMaxLeaseMs);
    ok = false;
  }
  return ok;
}

}  // namespace

std::string RedisUrl::describe() const {
  std::string out = host + ":" + std::to_string(port);
  if (db != 0) out += "/" + std::to_string(db);
  if (!password.empty()) out += user.empty() ? " (AUTH)" : " (AUTH as " + user + ")";
  return out;
}

std::string redactRedisUrl(std::string_view text) {
  constexpr std::string_view kScheme = "redis://";
  if (text.substr(0, kScheme.size()) != kScheme) return std::string(text);
  const std::size_t at = text.rfind('@');
  if (at == std::string_view::npos) return std::string(text);
  const std::string_view info = text.substr(kScheme.size(), at - kScheme.size());
  const std::size_t colon = info.find(':');
  const std::string_view user =
      colon == std::string_view::npos ? std::string_view{} : info.substr(0, colon);
  return std::string(kScheme) + std::string(user) + ":***" + std::string(text.substr(at));
}

std::optional<RedisUrl> parseRedisUrl(std::string_view text, std::string& error) {
  constexpr std::string_view kScheme = "redis://";
  if (text.substr(0, kScheme.size()) != kScheme) {
    error = "does not start with redis://";
    return std::nullopt;
  }
  std::string_view rest = text.substr(kScheme.size());
  RedisUrl url;
  // USER:PASSWORD@ (the last '@': a password may hold one %-encoded or not).
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    const std::size_t colon = info.find(':');
    if (colon == std::string_view::npos) {
      error = "the part before '@' is not :PASSWORD or USER:PASSWORD";
      return std::nullopt;
    }
    const auto user = percentDecoded(info.substr(0, colon));
    const auto password = percentDecoded(info.substr(colon + 1));
    if (!user || !password) {
      error = "a '%' in the user or password is not followed by two hex digits";
      return std::nullopt;
    }
    if (password->empty()) {
      error = "the password after ':' is empty";
      return std::nullopt;
    }
    url.user = *user;
    url.password = *password;
  }
  // HOST:PORT[/DB]
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      std::int64_t n = 0;
      RejectReason why{};
      if (!parseBoundedInt(db, 0, std::numeric_limits<int>::max(), n, why)) {
        error = "the database \"" + std::string(db) + "\" is not an integer in [0, " +
                std::to_string(std::numeric_limits<int>::max()) + "]";
        return std::nullopt;
      }
      url.db = static_cast<int>(n);
    }
  }
  const auto hp = parseHostPort(rest);
  if (!hp || hp->port == 0 || hp->host.empty()) {
    error = "\"" + std::string(rest) + "\" is not HOST:PORT with a port in [1, 65535]";
    return std::nullopt;
  }
  url.host = hp->host;
  url.port = hp->port;
  return url;
}

int parseArgs(int argc, char** argv, Options& o) {
  // Every bad flag is reported, then 1: one run shows all that is wrong with a command line.
  bool failed = false;
  bool show_usage = false;      // after an unknown flag or a missing --endpoint
  bool endpoint_given = false;  // a bad --endpoint is reported as such, not as a missing one
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    // The flag's value; nullopt (reported, `failed` set) when the command line ends first.
    auto next = [&]() -> std::optional<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) {
        std::fprintf(stderr, "holdback-gateway: %s needs a value\n", arg.c_str());
        failed = true;
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    // A positive integer no larger than `max`, into `out`.
    auto number = [&](auto& out, unsigned long long max) {
      const auto v = next();
      if (!v) return false;
      bool tooLarge = false;
      const auto n = positive<std::remove_reference_t<decltype(out)>>(*v, tooLarge);
      if (!n && !tooLarge) {
        std::fprintf(stderr, "holdback-gateway: %s: \"%s\" is not a positive integer\n",
                     arg.c_str(), v->c_str());
        return false;
      }
      if (tooLarge || static_cast<unsigned long long>(*n) > max) {
        std::fprintf(stderr, "holdback-gateway: %s: \"%s\" is over the largest allowed, %llu\n",
                     arg.c_str(), v->c_str(), max);
        return false;
      }
      out = *n;
      return true;
    };
    constexpr unsigned long long kIntMax = std::numeric_limits<int>::max();
    struct IntFlag {
      const char* name;
      int* out;
      unsigned long long max;
    };
    // --threads: each is an OS thread with its own io_context (a million failed to start, and
    // the process aborted).
    const IntFlag int_flags[] = {
        {"--scrape-interval-ms", &o.scrapeIntervalMs, kIntMax},
        {"--threads", &o.threads, 256},
        {"--max-connections", &o.maxConnections, kIntMax},
        {"--max-connections-per-client", &o.maxConnectionsPerClient, kIntMax},
        {"--header-timeout-ms", &o.headerTimeoutMs, kIntMax},
        {"--body-timeout-ms", &o.bodyTimeoutMs, kIntMax},
        {"--idle-timeout-s", &o.idleTimeoutS, kIntMax},
        {"--upstream-timeout-s", &o.upstreamTimeoutS, kIntMax},
        {"--upstream-connect-ms", &o.upstreamConnectMs, kIntMax},
        {"--upstream-max-idle", &o.upstreamMaxIdle, kIntMax},
        {"--upstream-idle-ms", &o.upstreamIdleMs, kIntMax},
        {"--drain-timeout-s", &o.drainTimeoutS, kIntMax},
        {"--upstream-max-connections", &o.upstreamMaxConnections, kIntMax},
        {"--replica-sync-interval-ms", &o.replicaSyncIntervalMs, kIntMax},
        {"--replica-sync-ttl-ms", &o.replicaSyncTtlMs, kIntMax},
        {"--replica-lease-ms", &o.replicaLeaseMs, kMaxLeaseMs},
    };
    struct SizeFlag {
      const char* name;
      std::size_t* out;
      unsigned long long max;
    };
    // --max-header-bytes: the HTTP parser's header limit is 32 bits (4294967296 wrapped to 0 and
    // every request got 431); a header buffer is per connection, so 64 MiB is plenty.
    const SizeFlag size_flags[] = {
        {"--max-header-bytes", &o.maxHeaderBytes, 64ULL << 20},
        {"--max-body-bytes", &o.maxBodyBytes, std::numeric_limits<std::size_t>::max()},
        {"--max-buffered-bytes", &o.maxBufferedBytes, std::size_t{INT64_MAX}},
        {"--max-response-bytes", &o.maxResponseBytes, std::size_t{INT64_MAX}},
        {"--max-scrape-bytes", &o.maxScrapeBytes, std::numeric_limits<std::size_t>::max()}};
    bool matched = false;
    for (const IntFlag& f : int_flags) {
      if (arg == f.name) {
        failed |= !number(*f.out, f.max);
        matched = true;
      }
    }
    for (const SizeFlag& f : size_flags) {
      if (arg == f.name) {
        failed |= !number(*f.out, f.max);
        matched = true;
      }
    }
    if (matched) continue;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return failed ? 1 : 2;
    } else if (arg == "--print-default-config") {
      std::fwrite(kDefaultConfigText.data(), 1, kDefaultConfigText.size(), stdout);
      return 2;
    } else if (arg == "--endpoint") {
      endpoint_given = true;
      auto v = next();
      if (!v) continue;
      // An optional slot count: URL,slots=N.
      std::int64_t slots = 0;
      if (const auto comma = v->find(','); comma != std::string::npos) {
        const auto n = slotCount(arg + " " + *v, v->substr(comma + 1), "slots=");
        if (!n) {
          failed = true;
          continue;
        }
        slots = *n;
        v->resize(comma);
      }
      const auto hp = parseEndpointUrl(*v);
      if (!hp) {
        std::fprintf(
            stderr, "holdback-gateway: --endpoint: \"%s\" is not http://HOST:PORT (port 1-65535)\n",
            v->c_str());
        failed = true;
        continue;
      }
      std::string url = *v;
      if (url.back() == '/') url.pop_back();
      o.endpointUrls.push_back(url);
      o.endpoints.push_back(*hp);
      o.endpointSlots.push_back(slots);
    } else if (arg == "--endpoint-slots") {
      if (const auto v = next()) {
        const auto n = slotCount(arg, *v, "");
        failed |= !n;
        if (n) o.poolSlots = *n;
      }
    } else if (arg == "--config") {
      if (const auto v = next()) o.configFile = *v;
    } else if (arg == "--model") {
      if (const auto v = next()) o.models.push_back(*v);
    } else if (arg == "--listen") {
      const auto v = next();
      if (!v) continue;
      if (const auto hp = parseHostPort(*v)) {
        o.listen = *hp;
      } else {
        std::fprintf(stderr, "holdback-gateway: --listen: \"%s\" is not HOST:PORT\n", v->c_str());
        failed = true;
      }
    } else if (arg == "--admin-listen") {
      const auto v = next();
      if (!v) continue;
      if (const auto hp = parseHostPort(*v)) {
        o.adminListen = *hp;
      } else {
        std::fprintf(stderr, "holdback-gateway: --admin-listen: \"%s\" is not HOST:PORT\n",
                     v->c_str());
        failed = true;
      }
    } else if (arg == "--api-keys") {
      const auto v = next();
      if (v && v->empty()) {
        std::fprintf(stderr, "holdback-gateway: --api-keys: the file name is empty\n");
        failed = true;
      } else if (v) {
        o.apiKeysFile = *v;  // read by main (tenants.hpp)
      }
    } else if (arg == "--replica-sync") {
      const auto v = next();
      if (!v) continue;
      std::string error;
      if (const auto url = parseRedisUrl(*v, error)) {
        o.replicaSync = *url;
      } else {
        std::fprintf(stderr,
                     "holdback-gateway: --replica-sync: \"%s\" is not "
                     "redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: %s\n",
                     redactRedisUrl(*v).c_str(), error.c_str());
        failed = true;
      }
    } else if (arg == "--replica-sync-prefix") {
      const auto v = next();
      if (!v) continue;
      std::string error;
      if (validKeyPrefix(*v, error)) {
        o.replicaSyncPrefix = *v;
      } else {
        std::fprintf(stderr, "holdback-gateway: --replica-sync-prefix: \"%s\" is not %s\n",
                     printable(*v).c_str(), error.c_str());
        failed = true;
      }
    } else if (arg == "--replica-feed") {
      const auto v = next();
      if (!v) continue;
      if (*v == "on" || *v == "off") {
        o.replicaFeed = *v == "on";
      } else {
        std::fprintf(stderr, "holdback-gateway: --replica-feed: \"%s\" is not on or off\n",
                     v->c_str());
        failed = true;
      }
    } else if (arg == "--replica-mode") {
      const auto v = next();
      if (!v) continue;
      if (*v == "share" || *v == "reserve") {
        o.replicaReserve = *v == "reserve";
      } else {
        std::fprintf(stderr, "holdback-gateway: --replica-mode: \"%s\" is not share or reserve\n",
                     printable(*v).c_str());
        failed = true;
      }
    } else if (arg == "--objective") {
      const auto v = next();
      std::string error;
      if (v && !o.objectives.set(*v, &error)) {
        std::fprintf(stderr, "holdback-gateway: --objective: %s\n", error.c_str());
        failed = true;
      }
    } else if (arg == "--dialect") {
      if (const auto v = next()) o.dialect = *v;  // checked by resolveDialects
    } else if (arg == "--dialect-file") {
      if (const auto v = next()) o.dialectFile = *v;  // read by resolveDialects
    } else if (arg == "--endpoint-dialect") {
      const auto v = next();
      const auto eq = v ? v->rfind('=') : std::string::npos;
      if (v && (eq == std::string::npos || eq == 0 || eq + 1 == v->size())) {
        std::fprintf(stderr, "holdback-gateway: --endpoint-dialect: \"%s\" is not URL=DIALECT\n",
                     v->c_str());
        failed = true;
      } else if (v) {
        o.endpointDialects.emplace_back(v->substr(0, eq), v->substr(eq + 1));
      }
    } else if (arg == "--metric-waiting" || arg == "--metric-running" ||
               arg == "--metric-kv-usage" || arg == "--metric-kv-capacity-tokens" ||
               arg == "--metric-slots") {
      if (const auto v = next()) o.metricSpecs.emplace_back(arg, *v);  // parsed by resolveDialects
    } else if (arg == "--no-scrape-lag-credit" && !has_value) {
      std::fprintf(stderr,
                   "holdback-gateway: warning: --no-scrape-lag-credit is deprecated and does "
                   "nothing: the gateway feeds the library's dispatch ledger (set "
                   "flowControl.dispatchLedger.correction: false in the config to turn the "
                   "correction off)\n");
    } else {
      // A redis:// URL's password is not echoed, even in a misspelt flag.
      std::string shown = argv[i];
      if (const std::size_t url = shown.find("redis://"); url != std::string::npos) {
        shown = shown.substr(0, url) + redactRedisUrl(std::string_view(shown).substr(url));
      }
      std::fprintf(stderr, "holdback-gateway: unknown argument \"%s\"\n", shown.c_str());
      failed = show_usage = true;
    }
  }
  if (o.endpoints.empty() && !endpoint_given) {
    std::fprintf(stderr, "holdback-gateway: at least one --endpoint is required\n");
    failed = show_usage = true;
  }
  // A chunked body reserves --max-body-bytes of the budget before it is read (overload.hpp): a
  // smaller budget would refuse every one.
  if (o.maxBufferedBytes > 0 && o.maxBufferedBytes < o.maxBodyBytes) {
    std::fprintf(stderr,
                 "holdback-gateway: --max-buffered-bytes: %zu is below --max-body-bytes (%zu); it "
                 "must hold at least one body\n",
                 o.maxBufferedBytes, o.maxBodyBytes);
    failed = true;
  }
  failed |= !checkReplicaMode(o);
  if (show_usage) std::fputs(kUsage, stderr);
  return failed ? 1 : 0;
}

}  // namespace holdback::gateway
