#!/usr/bin/env bash
# Builds holdback and runs every test:
#   0. Clang's thread-safety analysis of the library's lock annotations (scripts/thread-safety.sh,
#      about 30 s),
#   1. the concurrency tests under ThreadSanitizer (build/tsan),
#   2. the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (build/asan), the unit
#      and concurrency tests linked to holdback::header_only (so the suite runs in both modes),
#   3. the core library and its tests with -fno-exceptions as a shared library with hidden
#      symbols, checking its exports (build/noexcept, preset `noexcept`),
#   4. every libFuzzer target for HOLDBACK_FUZZ_SECONDS (default 60) each (scripts/fuzz.sh,
#      build/fuzz),
#   5. the whole suite (build/default), ending with CTest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
holdback_ensure_packages

jobs=$(nproc)

scripts/thread-safety.sh

echo "== ThreadSanitizer: concurrency tests" >&2
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOLDBACK_SANITIZE=thread \
  -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_BUILD_EXAMPLES=OFF -DHOLDBACK_BUILD_TOOLS=OFF >/dev/null
cmake --build build/tsan -j"$jobs" --target holdback_concurrency_tests
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1" ctest -L concurrency --output-on-failure -j"$jobs")

echo "== AddressSanitizer + UndefinedBehaviorSanitizer: all tests" >&2
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DHOLDBACK_SANITIZE=address,undefined \
  -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_TEST_HEADER_ONLY=ON >/dev/null
cmake --build build/asan -j"$jobs"
(cd build/asan && ASAN_OPTIONS="detect_leaks=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" ctest --output-on-failure -j"$jobs")

echo "== -fno-exceptions, shared library with hidden symbols: core tests" >&2
cmake --preset noexcept >/dev/null
cmake --build --preset noexcept -j"$jobs"
ctest --preset noexcept -j"$jobs"

scripts/fuzz.sh

echo "== All tests" >&2
cmake -S . -B build/default -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/default -j"$jobs"
cd build/default
ctest --output-on-failure -j"$jobs"
