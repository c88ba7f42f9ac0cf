#!/usr/bin/env bash
# Fuzzes the gateway's parsers of outside input (examples/gateway/fuzz/input_fuzzer.cpp: request
# bodies, fairness ids, stream usage events, Redis values, the API key file, the body reader's
# JSON pass against nlohmann's parser) with libFuzzer,
# ASan and UBSan, for SECONDS (default 60). Not part of scripts/test.sh.
#
#   scripts/dev/fuzz-gateway-inputs.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/deps.sh
holdback_ensure_packages clang-14 libclang-rt-14-dev llvm-14
seconds=${1:-60}
work=build/fuzz-gateway
mkdir -p "$work/corpus"
gw=examples/gateway
# The version header is generated at configure time: configure a library-only tree for it.
cmake -S . -B "$work/lib" -DHOLDBACK_BUILD_TESTS=OFF -DHOLDBACK_BUILD_TOOLS=OFF \
  -DHOLDBACK_BUILD_EXAMPLES=OFF -DHOLDBACK_BUILD_BENCH=OFF >/dev/null
# The Asio definitions are the gateway's (examples/gateway/CMakeLists.txt; net.hpp checks them).
asio=(-DBOOST_ASIO_NO_DEPRECATED -DBOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE=16
  -DBOOST_ASIO_DISABLE_AWAITABLE_FRAME_RECYCLING -DBOOST_ASIO_DISABLE_STD_ALIGNED_ALLOC
  -DBOOST_ASIO_DISABLE_BOOST_ALIGN)
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DHOLDBACK_HEADER_ONLY "${asio[@]}" \
  -Iinclude -I"$work/lib/include" -I$gw $gw/fuzz/input_fuzzer.cpp $gw/gateway_http.cpp \
  $gw/http_message.cpp \
  $gw/replica_figures_text.cpp $gw/replica_input.cpp $gw/tenants.cpp $gw/sha256.cpp -lyaml \
  -o "$work/input_fuzzer"
printf '\x00{"prompt":"hi","max_tokens":3,"stream":true,"messages":[{"content":"x"}]}' \
  >"$work/corpus/body"
printf '\x05tenants:\n  - name: a\n    maxObjective: batch\n    keys: [abcdefghijklmnopqrstuvwxyz]\n' \
  >"$work/corpus/keys"
printf '\x09POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nT: 1\r\n\r\n' \
  >"$work/corpus/request"
printf '\x0aHTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello' >"$work/corpus/response"
printf '\x07data: {"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n' >"$work/corpus/stream"
printf '\x08{"a":[1,-2.5e3,"\\u00e9\\ud83d\\ude00",true,null,{}],"b":18446744073709551615}' \
  >"$work/corpus/json"
ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  "$work/input_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 "$work/corpus"
