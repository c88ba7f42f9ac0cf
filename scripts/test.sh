#!/usr/bin/env bash
# Builds holdback and runs every test, the ordinary suite first for a fast verdict:
#   1. the whole suite (build/default), the hot-path benchmark gate (scripts/dev/bench-gate.py: the
#      dispatch round trip and cycle against a floor measured in the same run, within 20 % of
#      bench/hot-path-baseline.json's ratios) and the header self-containment check (every public
#      header compiles and links on its own, compiled and header-only: target
#      holdback_header_checks); stops here when it fails,
#   2. Clang's thread-safety analysis of the library's lock annotations (scripts/dev/thread-safety.sh),
#      then the concurrency tests under ThreadSanitizer (build/tsan),
#   3. the whole suite but the docs checks under AddressSanitizer + UndefinedBehaviorSanitizer
#      (build/asan), the unit and concurrency tests linked to holdback::header_only (so the suite
#      runs in both modes), each GoogleTest binary as four shards (one process each) instead of
#      one process per test,
#   4. the core library and its tests with -fno-exceptions as a shared library with hidden
#      symbols, checking its exports (build/noexcept, preset `noexcept`),
#   5. every libFuzzer target for HOLDBACK_FUZZ_SECONDS (default 30) each (scripts/dev/fuzz.sh,
#      build/fuzz),
# and ends by printing the ordinary suite's CTest summary line again (CI counts the last one).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
holdback_ensure_packages

jobs=$(nproc)
# Each stage's wall time, printed at the end (stage NAME starts the next one).
stage_name=""
stage_start=$SECONDS
stage_times=()
stage() {
  if [ -n "$stage_name" ]; then
    stage_times+=("$(printf '%6d s  %s' $((SECONDS - stage_start)) "$stage_name")")
  fi
  stage_name=$1
  stage_start=$SECONDS
  [ -n "$1" ] && echo "== $1" >&2
  return 0
}
print_stage_times() {
  stage ""
  echo "== Wall time per stage (total $SECONDS s):" >&2
  printf '%s\n' "${stage_times[@]}" >&2
}
summary_file=build/default/ctest-summary.txt
# Debug information as line tables only (-g1): failures' stack traces keep their files and lines,
# and the builds take about a fifth less compile time (one gateway source: 36 -> 29 s at -O2,
# 39.5 -> 31.9 s in the ASan build).
relwithdebinfo=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
# Test binaries, the CLI, the simulator and the example programs compiled in unity batches
# (HOLDBACK_UNITY): GoogleTest's, Beast's and holdback's headers parsed, and their templates
# instantiated, once per batch of 3-16 files instead of once per file. Measured in compile CPU
# seconds (-O2 -g1): the test binaries' files 744 -> about 250; the gateway 258 -> 138, the model
# server 94 -> 56, the simulator 99 -> 40.
unity=(-DHOLDBACK_UNITY=ON)

stage "All tests (build/default)"
cmake -S . -B build/default -DCMAKE_BUILD_TYPE=RelWithDebInfo "${relwithdebinfo[@]}" "${unity[@]}" \
  >/dev/null
cmake --build build/default -j"$jobs"
mkdir -p build/default
default_status=0
(cd build/default && ctest --output-on-failure -j"$jobs") | tee build/default/ctest.log ||
  default_status=$?
grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" build/default/ctest.log | tail -n 1 \
  >"$summary_file" || true
if [ "$default_status" -ne 0 ]; then
  echo "== The ordinary suite failed; sanitizer and fuzz stages skipped" >&2
  print_stage_times
  cat "$summary_file"
  exit "$default_status"
fi

stage "Hot-path benchmark gate (bench/hot-path-baseline.json)"
python3 scripts/dev/bench-gate.py build/default

stage "Every public header on its own, compiled and header-only"
cmake --build build/default -j"$jobs" --target holdback_header_checks

stage "Clang thread-safety analysis"
scripts/dev/thread-safety.sh

stage "ThreadSanitizer: concurrency tests"
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${relwithdebinfo[@]}" "${unity[@]}" \
  -DHOLDBACK_SANITIZE=thread \
  -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_BUILD_EXAMPLES=OFF -DHOLDBACK_BUILD_TOOLS=OFF >/dev/null
cmake --build build/tsan -j"$jobs" --target holdback_concurrency_tests
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1" ctest -L concurrency --output-on-failure -j"$jobs")

stage "AddressSanitizer + UndefinedBehaviorSanitizer: all tests but the docs checks"
# Four GoogleTest shards per test binary, each one process (cmake/test_registration.cmake): a
# Debug + ASan test binary takes about 0.75 s to start, which one process per test paid ~690 times.
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 "${unity[@]}" \
  -DHOLDBACK_SANITIZE=address,undefined \
  -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_TEST_HEADER_ONLY=ON -DHOLDBACK_TEST_SHARDS=4 >/dev/null
cmake --build build/asan -j"$jobs"
# The docs label checks the pages' content, which the ordinary stage does; here Docs.ConfigReference
# alone took 234 s of test time (one `holdback validate` per reference example, whose loader
# paths the config tests run under the sanitizers anyway), the whole ctest run 795 s at -j2.
# One test is left to the ordinary stage: CliSimulateTest.DefaultOutputIsOneScreenNamingThe-
# RecommendedArm checks the default `simulate` screen as users run it (minutes of simulation), which
# took 107 s here, the longest shard by far; the simulator's code runs under the sanitizers in the
# other simulate tests. So is SimEvaluationTest.OneReplicaReproducesTheSingleGatewayFigures (one
# replica's figures equal one gateway's over the built-in scenarios: 51 s of a 142 s shard here,
# 3.5 s in the ordinary stage), whose runs the other replica tests cover under the sanitizers.
(cd build/asan && ASAN_OPTIONS="detect_leaks=1" \
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  GTEST_FILTER="-CliSimulateTest.DefaultOutputIsOneScreenNamingTheRecommendedArm:SimEvaluationTest.OneReplicaReproducesTheSingleGatewayFigures" \
  ctest -LE docs --output-on-failure -j"$jobs")

stage "-fno-exceptions, shared library with hidden symbols: core tests"
cmake --preset noexcept "${unity[@]}" >/dev/null
cmake --build --preset noexcept -j"$jobs"
ctest --preset noexcept -j"$jobs"

stage "libFuzzer targets"
scripts/dev/fuzz.sh
print_stage_times

echo "== All stages passed; the ordinary suite (build/default):" >&2
cat "$summary_file"
