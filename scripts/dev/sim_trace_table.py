#!/usr/bin/env python3
"""The "Real traffic" tables of docs/guide/traces.md from `holdback simulate --format json` reports.

Per scenario, seeds, detector and arm: the top class's TTFT p99 over its unloaded p99 over the
whole run and in its worst minute (the minute with the highest TTFT p99, per seed), the lowest
class's output tokens/s as % of static-1.0, in-flight evictions per top-class request and the
lowest class's wasted share of its generated tokens; each as mean (worst seed), as markdown rows.

    holdback simulate --scenario azure-code --arms recommended,static-1.0,none --detector both \
        --seeds 1-5 --format json > azure-code-1-5.json
    scripts/dev/sim_trace_table.py azure-code-1-5.json [more.json ...]

With --oracle RANGES (e.g. --oracle 1-5,6-10) the reports are one seed each and include the arm
`oracle`; the rows group the seeds by the given ranges and add the lowest class's output tokens/s
as % of the oracle's on the same seed (mean (worst seed)), and the windows of a scenario with
on/off phases (TTFT p99 x unloaded in burst and onset, batch % of static-1.0 in idle windows):

    for k in $(seq 1 10); do
      holdback simulate --scenario azure-code --seeds $k --detector both --format json \
        --arms oracle,recommended,reservation+evict-hol,static-1.0 > azure-code-$k.json
    done
    scripts/dev/sim_trace_table.py --oracle 1-5,6-10 azure-code-*.json

--rows A,B (before --oracle) prints only those arms' rows.
"""
import json
import math
import sys


def cell(figures, key, decimals, worst):
    """mean (worst seed): worst is "max" or "min" (the index into the [min, max] spread)."""
    if figures.get(key) is None:
        return "-"
    lo, hi = figures["spread"][key]
    w = hi if worst == "max" else lo
    return f"{figures[key]:.{decimals}f} ({w:.{decimals}f})"


def multi_seed(paths):
    print("| scenario | seeds | detector | arm | TTFT p99 x unl. | worst minute x unl. "
          "| batch % static-1.0 | evictions / interactive req. | batch wasted % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        seeds = report["seeds"]
        span = f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
        for detector in report["reports"]:
            for arm in detector["arms"]:
                classes = arm["classes"]
                top = max(classes, key=lambda c: c["priority"])
                low = min(classes, key=lambda c: c["priority"])
                row = [report["scenario"], span, detector["detector"], arm["name"],
                       cell(top["windows"]["all"], "ttftP99OverUnloaded", 1, "max"),
                       cell(top["windows"]["worstMinute"], "ttftP99OverUnloaded", 1, "max"),
                       cell(low["windows"]["all"], "outputTokensPctOfStatic", 0, "min"),
                       cell(arm, "evictionsPerTopRequest", 3, "max"),
                       cell(low, "wastedPct", 2, "max")]
                print("| " + " | ".join(row) + " |")


def seed_figures(arm):
    """The figures of one arm on one seed (a one-seed report)."""
    classes = arm["classes"]
    top = max(classes, key=lambda c: c["priority"])
    low = min(classes, key=lambda c: c["priority"])
    tw, lw = top["windows"], low["windows"]
    return {
        "p99": tw["all"].get("ttftP99OverUnloaded"),
        "worstMin": tw.get("worstMinute", {}).get("ttftP99OverUnloaded"),
        "burst": tw.get("burst", {}).get("ttftP99OverUnloaded"),
        "onset": tw.get("onset", {}).get("ttftP99OverUnloaded"),
        "static": lw["all"].get("outputTokensPctOfStatic"),
        "idleStatic": lw.get("idle", {}).get("outputTokensPctOfStatic"),
        "tokens": lw["all"].get("outputTokensPerSec"),
        "evictions": arm.get("evictionsPerTopRequest"),
        "wasted": low.get("wastedPct"),
    }


def summary(values, decimals, worst):
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "-"
    w = max(values) if worst == "max" else min(values)
    return f"{sum(values) / len(values):.{decimals}f} ({w:.{decimals}f})"


def parse_ranges(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.append((part, set(range(int(lo), int(hi or lo) + 1))))
    return out


def load_seed_reports(paths, figures_of, scenario_of=lambda name: name,
                      needs="one seed per report"):
    """Reads reports of one seed each: runs[(scenario, detector, arm)][seed] = figures_of(arm),
    and the keys in the order first seen."""
    runs, order = {}, []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        if len(report["seeds"]) != 1:
            sys.exit(f"{path}: {needs}, found {report['seeds']}")
        seed = report["seeds"][0]
        for detector in report["reports"]:
            for arm in detector["arms"]:
                key = (scenario_of(report["scenario"]), detector["detector"], arm["name"])
                if key not in runs:
                    runs[key] = {}
                    order.append(key)
                runs[key][seed] = figures_of(arm)
    return runs, order


def pct_of_oracle(runs, scenario, detector, per_seed):
    """Each seed's batch output tokens/s as % of the oracle arm's on the same seed."""
    oracle = runs.get((scenario, detector, "oracle"), {})
    return [100.0 * f["tokens"] / oracle[s]["tokens"]
            for s, f in per_seed.items() if s in oracle and oracle[s]["tokens"]]


def with_oracle(ranges, paths, only=None):
    runs, order = load_seed_reports(paths, seed_figures, needs="--oracle needs one seed per report")
    on_off = any(f["burst"] is not None for seeds in runs.values() for f in seeds.values())
    if on_off:
        print("| scenario | seeds | detector | arm | burst TTFT p99 x unl. | onset x unl. "
              "| batch % static-1.0 | idle batch % static-1.0 | batch % oracle "
              "| evictions / interactive req. | batch wasted % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| scenario | seeds | detector | arm | TTFT p99 x unl. | worst minute x unl. "
              "| batch % static-1.0 | batch % oracle | evictions / interactive req. "
              "| batch wasted % |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for label, seeds in ranges:
        for scenario, detector, arm in order:
            if only and arm not in only:
                continue
            per_seed = {s: f for s, f in runs[(scenario, detector, arm)].items() if s in seeds}
            if not per_seed:
                continue
            pct = pct_of_oracle(runs, scenario, detector, per_seed)

            def col(k):
                return [f[k] for f in per_seed.values()]

            if on_off:
                latency = [summary(col("burst"), 1, "max"), summary(col("onset"), 1, "max")]
                goodput = [summary(col("static"), 0, "min"), summary(col("idleStatic"), 0, "min")]
            else:
                latency = [summary(col("p99"), 1, "max"), summary(col("worstMin"), 1, "max")]
                goodput = [summary(col("static"), 0, "min")]
            row = ([scenario, label, detector, arm] + latency + goodput +
                   [summary(pct, 0, "min"), summary(col("evictions"), 3, "max"),
                    summary(col("wasted"), 2, "max")])
            print("| " + " | ".join(row) + " |")


def main(argv):
    only = None
    if argv and argv[0] == "--rows":
        only, argv = set(argv[1].split(",")), argv[2:]
    if argv and argv[0] == "--oracle":
        with_oracle(parse_ranges(argv[1]), argv[2:], only)
    else:
        multi_seed(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
