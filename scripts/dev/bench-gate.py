#!/usr/bin/env python3
"""Fails when the flow controller's hot path regressed against the checked-in baseline.

    scripts/dev/bench-gate.py BUILD_DIR [--record]

Runs holdback_bench_flow_controller's gated benchmarks (bench/hot-path-baseline.json names them)
together with the floor they are measured against, BM_FloorContendedDeque on one thread (a
std::mutex-guarded std::deque, locked twice per operation as enqueue + dispatchCycle lock the
controller: the same kind of work without the controller's), in one process, interleaved at
random, REPETITIONS times each.
For each gated benchmark the figure is its CPU time divided by the floor's, both the median over
the repetitions: a ratio measured in the same run, so a slower or busier machine moves both sides
(absolute times are not comparable between machines; ratios roughly are).

A gated benchmark fails when its ratio exceeds the baseline's by more than the tolerance (20 %), or
when it allocates in steady state: more than one allocation per 1,000 operations (the amortized
growth of the controller's pools stays far below that; an allocation per dispatch is 1,000 times
above it).
A failing measurement is taken once more and the gate fails only if the second one fails too (a
shared machine's burst of load rarely lasts two runs; a regression does).
--record writes the measured ratios and allocation counts as the new baseline (after a deliberate
change; say so in the commit).

Exit status: 0 pass, 1 regression, 2 usage or a benchmark that failed to run.
"""
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.join(HERE, "..", "..", "bench", "hot-path-baseline.json")
FLOOR = "BM_FloorContendedDeque/real_time/threads:1"
MAX_ALLOCS_PER_OP = 1e-3
REPETITIONS = 9


def run(binary, names):
    pattern = "^(" + "|".join(names + [FLOOR]) + ")$"
    out = subprocess.run(
        [binary, "--benchmark_filter=" + pattern, "--benchmark_format=json",
         "--benchmark_repetitions=%d" % REPETITIONS, "--benchmark_min_time=0.05",
         "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=false"],
        check=True, capture_output=True, text=True).stdout
    runs = {}
    allocs = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"]
        runs.setdefault(name, []).append(b["cpu_time"])
        for counter in ("allocs_per_round_trip", "allocs_per_dispatch"):
            if counter in b:
                allocs[name] = max(allocs.get(name, 0.0), b[counter])
    return runs, allocs


def measure_and_check(binary, baseline, record):
    tolerance = baseline["tolerance"]
    names = sorted(baseline["benchmarks"])
    try:
        runs, allocs = run(binary, names)
    except (OSError, subprocess.CalledProcessError) as e:
        print("bench-gate: %s did not run: %s" % (binary, e), file=sys.stderr)
        return 2
    missing = [n for n in names + [FLOOR] if n not in runs]
    if missing:
        print("bench-gate: no result for %s" % ", ".join(missing), file=sys.stderr)
        return 2
    floor = statistics.median(runs[FLOOR])
    failed = False
    measured = {}
    print("%-44s %10s %8s %8s %14s %9s" % ("benchmark (median of %d)" % REPETITIONS, "cpu ns",
                                            "ratio", "base", "allocs per 1M", "base"))
    print("%-44s %10.1f" % ("floor: " + FLOOR, floor))
    for name in names:
        ratio = statistics.median(runs[name]) / floor
        alloc = allocs.get(name, 0.0)
        measured[name] = {"ratioToFloor": round(ratio, 2), "allocsPerMillion": round(alloc * 1e6, 1)}
        base = baseline["benchmarks"][name]
        verdict = ""
        if ratio > base["ratioToFloor"] * (1 + tolerance):
            verdict += "  SLOWER than the baseline by more than %d %%" % round(tolerance * 100)
            failed = True
        if alloc > MAX_ALLOCS_PER_OP:
            verdict += "  ALLOCATES in steady state"
            failed = True
        print("%-44s %10.1f %8.2f %8.2f %14.1f %9.1f%s" % (
            name, statistics.median(runs[name]), ratio, base["ratioToFloor"], alloc * 1e6,
            base["allocsPerMillion"], verdict))
    if record:
        baseline["benchmarks"] = measured
        with open(BASELINE, "w") as f:
            json.dump(baseline, f, indent=2, sort_keys=True)
            f.write("\n")
        print("bench-gate: baseline recorded in %s" % os.path.relpath(BASELINE))
        return 0
    return 1 if failed else 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    record = "--record" in sys.argv[1:]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.join(args[0], "bench", "holdback_bench_flow_controller")
    with open(BASELINE) as f:
        baseline = json.load(f)
    status = measure_and_check(binary, baseline, record)
    if status == 1:
        print("bench-gate: over the baseline; measuring once more", file=sys.stderr)
        status = measure_and_check(binary, baseline, record)
    if status == 1:
        print("bench-gate: the hot path regressed (see above); if the change is deliberate, "
              "re-record with --record and say why in the commit", file=sys.stderr)
    elif status == 0 and not record:
        print("bench-gate: every gated benchmark within %d %% of the baseline ratio, none "
              "allocating in steady state" % round(baseline["tolerance"] * 100))
    return status


if __name__ == "__main__":
    sys.exit(main())
