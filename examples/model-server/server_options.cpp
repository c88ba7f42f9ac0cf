#include "server_options.hpp"

#include <charconv>
#include <cstdio>
#include <string_view>
#include <system_error>

#include "metric_dialects.hpp"

namespace holdback_examples {

namespace {

constexpr const char* kUsage =
    "usage: holdback-model-server [--host 127.0.0.1] [--port 0] [--slots 8] [--token-ms 20]\n"
    "                             [--prefill-ms 50] [--kv-capacity-tokens 16384]\n"
    "                             [--model fake-model] [--threads 256]\n"
    "                             [--fake-waiting N] [--fake-kv X] [--dialect vllm]\n"
    "                             [--prefill-base-ms 5] [--prefill-per-token-ms 0.05]\n"
    "                             [--tpot-base-ms 5] [--tpot-per-running-ms 0.25]\n"
    "A fake vLLM-like model server: continuous batching over --slots sequences (FIFO queue),\n"
    "one token every --token-ms after --prefill-ms, vLLM metrics on GET /metrics.\n"
    "Pool mode (any of the last four flags): the simulator's pool model instead: the first token\n"
    "prefill-base + prefill-per-token x prompt tokens after admission, then one token per decode\n"
    "step of tpot-base + tpot-per-running x running sequences; a sequence needs its prompt's KV\n"
    "free to start and holds prompt + generated tokens (docs/guide/replay.md).\n"
    "--threads caps the I/O threads (connections are coroutines on at most one thread per CPU).\n"
    "Prints `listening on http://HOST:PORT` once it accepts.\n"
    "--fake-waiting / --fake-kv (tests): report these as vllm:num_requests_waiting / the KV usage\n"
    "gauges whatever the real state (e.g. --fake-kv 50: a server reporting percent, not a\n"
    "fraction); requests are still served normally.\n"
    "--dialect: /metrics in another engine's names: vllm, vllm-v0, sglang, llamacpp, tgi,\n"
    "trtllm (docs/guide/engines.md).\n";

template <typename T>
bool parseNumber(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

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
      // The same bound as when each was a worker thread started up front.
      ok = positive(o.threads, 1) && o.threads <= 16384;
      if (!ok) std::fprintf(stderr, "holdback-model-server: --threads must be in [1, 16384]\n");
    } else if (arg == "--dialect") {
      o.dialect = value;
      ok = isServerDialect(value);
      if (!ok) {
        std::fprintf(stderr,
                     "holdback-model-server: --dialect: '%s' is not one of vllm, vllm-v0, "
                     "sglang, llamacpp, tgi, trtllm\n",
                     value.c_str());
      }
    } else if (arg == "--prefill-base-ms" || arg == "--prefill-per-token-ms" ||
               arg == "--tpot-base-ms" || arg == "--tpot-per-running-ms") {
      double v = 0.0;
      ok = parseNumber(value, v) && v >= 0.0 && v <= 1e6;
      if (!ok) {
        std::fprintf(stderr, "holdback-model-server: %s: '%s' is not a number in [0, 1e6]\n",
                     arg.c_str(), value.c_str());
      } else {
        o.poolModel = true;
        (arg == "--prefill-base-ms"        ? o.prefillBaseMs
         : arg == "--prefill-per-token-ms" ? o.prefillPerTokenMs
         : arg == "--tpot-base-ms"         ? o.tpotBaseMs
                                           : o.tpotPerRunningMs) = v;
      }
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

}  // namespace holdback_examples
