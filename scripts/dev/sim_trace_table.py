#!/usr/bin/env python3
"""The "Real traffic" table of docs/guide/traces.md from `holdback simulate --format json` reports.

Per scenario, seeds, detector and arm: the top class's TTFT p99 over its unloaded p99 over the
whole run and in its worst minute (the minute with the highest TTFT p99, per seed), the lowest
class's output tokens/s as % of static-1.0, in-flight evictions per top-class request and the
lowest class's wasted share of its generated tokens; each as mean (worst seed), as markdown rows.

    holdback simulate --scenario azure-code --arms recommended,static-1.0,none --detector both \
        --seeds 1-5 --format json > azure-code-1-5.json
    scripts/dev/sim_trace_table.py azure-code-1-5.json [more.json ...]
"""
import json
import sys


def cell(figures, key, decimals, worst):
    """mean (worst seed): worst is "max" or "min" (the index into the [min, max] spread)."""
    if figures.get(key) is None:
        return "-"
    lo, hi = figures["spread"][key]
    w = hi if worst == "max" else lo
    return f"{figures[key]:.{decimals}f} ({w:.{decimals}f})"


def main(paths):
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


if __name__ == "__main__":
    main(sys.argv[1:])
