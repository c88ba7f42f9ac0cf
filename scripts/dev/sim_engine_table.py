#!/usr/bin/env python3
"""The tables of docs/results/engine-priority.md from one-seed `holdback simulate --format json`
reports that include the arms `oracle` and `static-1.0`.

    for k in $(seq 1 10); do
      holdback simulate --scenario azure-conv --seeds $k --detector both --format json --jobs 1 \\
        --arms oracle,static-1.0,recommended,none+engine,... > DIR/azure-conv-$k.json
    done
    scripts/dev/sim_engine_table.py 1-5,6-10 DIR/*.json

Per scenario, seed range, detector and arm (mean over the seeds, worst seed in parentheses):
- TTFT: the top class's TTFT p99 over its unloaded p99 over the whole run, and in its worst
  window: the worst minute (a run without on/off phases) or the worst of the idle, burst and
  onset windows (per seed, the highest ratio);
- batch: the lowest class's output tokens/s as % of static-1.0 (the report's reference, on
  servers with the scenario's own scheduling: FCFS for the built-ins) and of the oracle on the
  same seed;
- evictions and preemptions per top-class request; the lowest class's output tokens destroyed by
  evictions and its tokens recomputed after preemptions, each as % of its generated tokens;
- misses: the targets TTFT <= 1.5x (run and worst window, mean), <= 2x (worst seed), batch >= 95 %
  of the oracle, <= 0.1 evictions per interactive request, <= 2 % of batch tokens wasted
  ("-" when every target holds).

--rows A,B (first) prints only those arms. engine-headroom is printed for the concurrency detector
on single-group pools only (elsewhere the arm is its static ceilings alone).
"""
import math
import sys

from sim_trace_table import load_seed_reports, parse_ranges, pct_of_oracle, summary

WINDOWS = ("idle", "burst", "onset")


def seed_figures(arm):
    classes = arm["classes"]
    top = max(classes, key=lambda c: c["priority"])
    low = min(classes, key=lambda c: c["priority"])
    tw, lw = top["windows"], low["windows"]
    if "burst" in tw:
        worst = max(tw[w].get("ttftP99OverUnloaded") or 0.0 for w in WINDOWS)
    else:
        worst = tw["worstMinute"].get("ttftP99OverUnloaded")
    return {
        "p99": tw["all"].get("ttftP99OverUnloaded"),
        "worst": worst,
        "static": lw["all"].get("outputTokensPctOfStatic"),
        "tokens": lw["all"].get("outputTokensPerSec"),
        "evictions": arm.get("evictionsPerTopRequest"),
        "preemptions": arm.get("preemptionsPerTopRequest", 0.0),
        "wasted": low.get("wastedPct"),
        "recomputed": low.get("recomputedPct", 0.0),
    }


def clean(values):
    return [v for v in values if v is not None and not math.isnan(v)]


def mean(values):
    values = clean(values)
    return sum(values) / len(values) if values else float("nan")


def misses(f, pct):
    out = []
    if mean(f["p99"]) > 1.5 or mean(f["worst"]) > 1.5:
        out.append("TTFT")
    elif max(clean(f["worst"]) + clean(f["p99"]), default=0.0) > 2.0:
        out.append("TTFT worst seed")
    if mean(pct) < 95.0:
        out.append("goodput")
    if mean(f["evictions"]) > 0.1:
        out.append("evictions")
    if mean(f["wasted"]) > 2.0:
        out.append("waste")
    return ", ".join(out) or "-"


def main(argv):
    only = None
    if argv and argv[0] == "--rows":
        only, argv = set(argv[1].split(",")), argv[2:]
    ranges, paths = parse_ranges(argv[0]), argv[1:]
    runs, order = load_seed_reports(
        paths, seed_figures, lambda name: name.rsplit("/", 1)[-1].removesuffix(".json"))
    print("| scenario | seeds | detector | arm | TTFT p99 x unl. | worst window x unl. "
          "| batch % static-1.0 | batch % oracle | evictions / int. req. "
          "| preemptions / int. req. | batch wasted % | batch recomputed % | misses |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, seeds in ranges:
        for scenario, detector, arm in order:
            if only and arm not in only:
                continue
            # engine-headroom counts twice the pool with the concurrency detector of a
            # single-group pool; elsewhere it is its static ceilings alone.
            if arm.startswith("engine-headroom") and (detector != "concurrency"
                                                   or scenario == "mixed-pool"):
                continue
            per_seed = {s: f for s, f in runs[(scenario, detector, arm)].items() if s in seeds}
            if not per_seed:
                continue
            pct = pct_of_oracle(runs, scenario, detector, per_seed)
            cols = {k: [f[k] for f in per_seed.values()] for k in next(iter(per_seed.values()))}
            row = [scenario, label, detector, arm,
                   summary(cols["p99"], 1, "max"), summary(cols["worst"], 1, "max"),
                   summary(cols["static"], 0, "min"), summary(pct, 0, "min"),
                   summary(cols["evictions"], 3, "max"), summary(cols["preemptions"], 3, "max"),
                   summary(cols["wasted"], 2, "max"), summary(cols["recomputed"], 2, "max"),
                   misses(cols, pct) if arm != "oracle" else ""]
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
