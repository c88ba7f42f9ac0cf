#!/usr/bin/env bash
# Runs every libFuzzer target for a bounded time and fails on any finding (crash, sanitizer
# report, leak, timeout, out-of-memory). Called by scripts/test.sh; runnable on its own.
#
#   HOLDBACK_FUZZ_SECONDS  seconds per target (default 30; the prometheus target gets half)
#   HOLDBACK_FUZZ_JOBS     targets run at the same time (default 2)
#   --build-only           build the targets and stop (scripts/test.sh builds them beside other
#                          stages' tests, then runs them with --run-only)
#   --run-only             run the targets already built in build/fuzz
#
# Build: clang 14 with -fsanitize=fuzzer plus ASan + UBSan, in build/fuzz. Each target starts
# from a scratch copy of its seed corpus (fuzz/corpus/<target>/), so the repository's corpus is
# never rewritten by a run. A finding is copied to fuzz/corpus/<target>/regression-<kind>-<sha1>
# and printed in base64 (to recover it from a CI log): commit it, fix the bug, and the CTest test
# FuzzCorpus.<target>, which replays that directory in every build, keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/deps.sh
# clang-14 does not pull in the libFuzzer/sanitizer runtimes (only a Recommends of
# libclang-common-14-dev, which deps.sh does not install); llvm-14 has llvm-symbolizer for
# readable stack traces.
holdback_ensure_packages clang-14 libclang-rt-14-dev llvm-14

step=all
case "${1:-}" in
  --build-only) step=build ;;
  --run-only) step=run ;;
  "") ;;
  *) echo "usage: $0 [--build-only | --run-only]" >&2; exit 2 ;;
esac
seconds=${HOLDBACK_FUZZ_SECONDS:-30}
parallel=${HOLDBACK_FUZZ_JOBS:-2}
targets="config policy flow_controller detector prometheus"
build=build/fuzz
work=$build/fuzz-run

if [ $step != run ]; then
  CXX=clang++-14 cmake -S . -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOLDBACK_FUZZ=ON \
    -DHOLDBACK_SANITIZE=address,undefined -DHOLDBACK_BUILD_TESTS=OFF -DHOLDBACK_BUILD_TOOLS=OFF \
    -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build $build -j"$(nproc)" --target $(for t in $targets; do echo "holdback_${t}_fuzzer"; done)
fi
[ $step = build ] && exit 0
echo "== libFuzzer: $targets, ${seconds}s each, $parallel at a time" >&2

rm -rf $work
mkdir -p $work
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14

# Runs one target; its libFuzzer output goes to $work/<target>.log. Inputs take milliseconds; the
# per-input timeout is 30 s rather than libFuzzer's usual 10 s because on a loaded shared machine
# a starved process (nice 19) hit 10 s on inputs that replay in 10 ms.
# The Prometheus text parser is a small grammar (about 2 M inputs in 150 s): half the budget.
fuzz_one() {
  local t=$1 max_len=4096 budget=$seconds
  [ "$t" = flow_controller ] && max_len=8192
  [ "$t" = prometheus ] && budget=$(((seconds + 1) / 2))
  mkdir -p $work/$t/corpus $work/$t/artifacts
  cp fuzz/corpus/$t/* $work/$t/corpus/
  $build/fuzz/holdback_${t}_fuzzer -max_total_time="$budget" -timeout=30 -rss_limit_mb=2048 \
    -max_len=$max_len -print_final_stats=1 -artifact_prefix=$work/$t/artifacts/ \
    $work/$t/corpus >$work/$t.log 2>&1
}

failed=""
running=0
for t in $targets; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ $running -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

for t in $targets; do
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' $work/$t.log | tail -1)
  corpus=$(ls $work/$t/corpus | wc -l)
  # libFuzzer also saves "slow-unit-*" inputs (over 10 s once); a real hang is a timeout-* (the
  # -timeout above), and on a loaded machine a slow unit is usually a scheduling stall.
  slow=$(ls $work/$t/artifacts | grep '^slow-unit-' || true)
  [ -n "$slow" ] && echo "note: $t saved a slow unit ($work/$t/artifacts/$slow); not a failure" >&2
  found=$(ls $work/$t/artifacts | grep -v '^slow-unit-' || true)
  if [ -n "$found" ] || ! grep -q "^Done [0-9]* runs" $work/$t.log; then
    failed="$failed $t"
    echo "FUZZ FINDING in $t (log: $work/$t.log):" >&2
    grep -E "ERROR|runtime error|invariant violated|SUMMARY" $work/$t.log | head -20 >&2 || true
    for f in $found; do
      kind=${f%%-*}
      dest=fuzz/corpus/$t/regression-$kind-$(sha1sum "$work/$t/artifacts/$f" | cut -c1-12)
      cp "$work/$t/artifacts/$f" "$dest"
      echo "  reproducer saved as $dest (base64: $(base64 -w0 "$dest"))" >&2
      echo "  replay: $build/fuzz/holdback_${t}_fuzzer $dest" >&2
    done
  else
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' $work/$t.log | tail -1)
    echo "fuzz $t: ${runs:-?} inputs in ${secs:-?}s, corpus ${corpus} files, no finding" >&2
  fi
done

if [ -n "$failed" ]; then
  echo "Fuzzing found problems in:$failed. Commit the regression-* files above into" >&2
  echo "fuzz/corpus/ (FuzzCorpus.* CTest tests replay them) and fix the bugs." >&2
  exit 1
fi
