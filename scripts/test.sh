#!/usr/bin/env bash
# Builds holdback and runs every test, the ordinary suite first for a fast verdict:
#   1. the whole suite (build/default), the hot-path benchmark gate (scripts/dev/bench-gate.py: the
#      dispatch round trip and cycle against a floor measured in the same run, within 20 % of
#      bench/hot-path-baseline.json's ratios) and the header self-containment check (every public
#      header compiles on its own, compiled and header-only, and links in header-only mode: target
#      holdback_header_checks); stops here when it fails,
#   2. Clang's thread-safety analysis of the library's lock annotations (scripts/dev/thread-safety.sh),
#      then the concurrency tests under ThreadSanitizer (build/tsan),
#   3. the whole suite but the docs checks under AddressSanitizer + UndefinedBehaviorSanitizer
#      (build/asan), the concurrency tests linked to holdback::header_only (so both modes run
#      under the sanitizers), each GoogleTest binary as four shards (one process each) instead of
#      one process per test,
#   4. the core library and its tests with -fno-exceptions as a shared library with hidden
#      symbols, checking its exports (build/noexcept, preset `noexcept`),
#   5. every libFuzzer target for HOLDBACK_FUZZ_SECONDS (default 30) each (scripts/dev/fuzz.sh,
#      build/fuzz),
# and ends by printing the ordinary suite's CTest summary line again (CI counts the last one).
#
# The builds of stages 2-5 (and the header checks) run in the background at the lowest CPU
# priority (SCHED_IDLE: they take only CPU time nothing else wants) while the ordinary suite
# builds and runs; each stage waits for its build when it starts. The end-to-end tests, which run
# one at a time and mostly wait on timers and sockets, leave most of the two cores idle (measured:
# 65 CPU-s over 198 s of wall time for the e2e label on two cores), and the builds use that time
# instead of running after the tests. The tests themselves still run in the order above, at
# normal priority, and the benchmark gate runs with the background builds paused.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
# Everything the stages need, installed before any of them starts (the background builds must not
# run apt-get beside the foreground): clang for the thread-safety analysis and the fuzzers.
holdback_ensure_packages clang-14 libclang-rt-14-dev llvm-14

jobs=$(nproc)
# Sets cpu_now to the CPU seconds (user + system) of this shell's finished children so far, from
# `times` run in this shell (in a command substitution it would count the subshell's children).
children_cpu() {
  local out
  out=$(mktemp)
  times >"$out"
  cpu_now=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                           printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$out")
  rm -f "$out"
}
# Each stage's wall time and the CPU time of the processes that ended during it (its own commands,
# and a background chain whose end it waited for), printed at the end (stage NAME starts the next
# one). Each background build's own CPU time is printed beside its wall time: on two cores, the
# CPU seconds of everything over two is about the run's length.
stage_name=""
stage_start=$SECONDS
children_cpu
stage_cpu=$cpu_now
stage_times=()
stage() {
  local cpu
  children_cpu
  cpu=$cpu_now
  if [ -n "$stage_name" ]; then
    stage_times+=("$(printf '%6d s  %6d CPU-s  %s' $((SECONDS - stage_start)) \
      $((cpu - stage_cpu)) "$stage_name")")
  fi
  stage_name=$1
  stage_start=$SECONDS
  stage_cpu=$cpu
  [ -n "$1" ] && echo "== $1" >&2
  return 0
}
print_stage_times() {
  stage ""
  echo "== Wall time per stage (total $SECONDS s):" >&2
  printf '%s\n' "${stage_times[@]}" >&2
  local f status secs cpu
  for f in "$bg"/*.status; do
    [ -f "$f" ] || continue
    read -r status secs cpu <"$f"
    printf '%6d s  %6d CPU-s  (background build %s, exit %s)\n' "$secs" "${cpu:-0}" \
      "$(basename "$f" .status)" "$status" >&2
  done
}
summary_file=build/default/ctest-summary.txt

# Background builds: each step's output goes to $bg/STEP.log and its exit status and wall seconds
# to $bg/STEP.status; await STEP prints a failed step's log and fails.
bg=build/ci-background
rm -rf "$bg"
mkdir -p "$bg"
bg_pids=()
bg_step() {
  local name=$1 start=$SECONDS status=0 cpu
  shift
  children_cpu
  cpu=$cpu_now
  "$@" >"$bg/$name.log" 2>&1 || status=$?
  children_cpu
  echo "$status $((SECONDS - start)) $((cpu_now - cpu))" >"$bg/$name.status.tmp"
  mv "$bg/$name.status.tmp" "$bg/$name.status"
}
# Starts a chain of steps ("NAME COMMAND..." words, steps separated by ";" words) as its own
# process group at SCHED_IDLE (nice 19 where the policy is refused).
background() {
  set -m
  (
    chrt --idle -p 0 $BASHPID >/dev/null 2>&1 || renice -n 19 -p $BASHPID >/dev/null
    step=()
    for word in "$@" ";"; do
      if [ "$word" = ";" ]; then
        bg_step "${step[@]}"
        step=()
      else
        step+=("$word")
      fi
    done
  ) &
  bg_pids+=($!)
  set +m
}
bg_signal() {
  local pid
  for pid in "${bg_pids[@]}"; do kill "-$1" -- "-$pid" 2>/dev/null || true; done
}
trap 'bg_signal TERM; bg_signal CONT' EXIT
await() {
  local name=$1 status secs pid alive
  while [ ! -f "$bg/$name.status" ]; do
    alive=0
    for pid in "${bg_pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    if [ $alive = 0 ] && [ ! -f "$bg/$name.status" ]; then
      echo "== The background build $name never finished (log: $bg/$name.log)" >&2
      return 1
    fi
    sleep 1
  done
  read -r status secs _ <"$bg/$name.status"
  echo "== (background build $name: ${secs} s, exit $status)" >&2
  if [ "$status" -ne 0 ]; then
    cat "$bg/$name.log" >&2
    return "$status"
  fi
}
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

build_tsan() {
  cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${relwithdebinfo[@]}" "${unity[@]}" \
    -DHOLDBACK_SANITIZE=thread \
    -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_BUILD_EXAMPLES=OFF -DHOLDBACK_BUILD_TOOLS=OFF &&
    cmake --build build/tsan -j"$jobs" --target holdback_concurrency_tests
}
# Four GoogleTest shards per test binary, each one process (cmake/test_registration.cmake): a
# Debug + ASan test binary takes about 0.75 s to start, which one process per test paid ~690 times.
build_asan() {
  cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 "${unity[@]}" \
    -DHOLDBACK_SANITIZE=address,undefined \
    -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_CONCURRENCY_TEST_HEADER_ONLY=ON -DHOLDBACK_TEST_SHARDS=4 &&
    cmake --build build/asan -j"$jobs"
}
build_noexcept() {
  cmake --preset noexcept "${unity[@]}" && cmake --build --preset noexcept -j"$jobs"
}
# The sanitizer, -fno-exceptions and fuzzer builds start now, beside the ordinary build.
background thread_safety scripts/dev/thread-safety.sh ";" tsan build_tsan ";" asan build_asan \
  ";" noexcept build_noexcept ";" fuzz scripts/dev/fuzz.sh --build-only

stage "All tests (build/default)"
cmake -S . -B build/default -DCMAKE_BUILD_TYPE=RelWithDebInfo "${relwithdebinfo[@]}" "${unity[@]}" \
  >/dev/null
cmake --build build/default -j"$jobs"
# The header checks build in build/default (they link its library), beside its tests.
background header_checks cmake --build build/default -j"$jobs" --target holdback_header_checks
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
# The background builds are paused while the benchmarks run (a few seconds).
bg_signal STOP
gate_status=0
python3 scripts/dev/bench-gate.py build/default || gate_status=$?
bg_signal CONT
[ "$gate_status" -eq 0 ] || exit "$gate_status"

stage "Every public header on its own, compiled and header-only"
await header_checks

stage "Clang thread-safety analysis"
await thread_safety
cat "$bg/thread_safety.log" >&2

stage "ThreadSanitizer: concurrency tests"
await tsan
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1" ctest -L concurrency --output-on-failure -j"$jobs")

stage "AddressSanitizer + UndefinedBehaviorSanitizer: all tests but the docs checks"
await asan
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
await noexcept
ctest --preset noexcept -j"$jobs"

stage "libFuzzer targets"
await fuzz
scripts/dev/fuzz.sh --run-only
print_stage_times

echo "== All stages passed; the ordinary suite (build/default):" >&2
cat "$summary_file"
