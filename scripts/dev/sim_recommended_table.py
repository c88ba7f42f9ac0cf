#!/usr/bin/env python3
"""The tables of docs/results/recommended.md, "Seeds 1-5" and "Seeds 6-10", from `holdback simulate
--format json` reports (one file per scenario and seed set), and the targets each row misses.

    for sc in default burst-after-idle short-bursts kv-bound; do
      build/default/holdback simulate --scenario $sc --seeds 1-5 \\
        --arms static-1.0,reservation+evict,recommended --format json > $sc.json
    done
    scripts/dev/sim_recommended_table.py default.json burst-after-idle.json ...

Each cell: mean over seeds (min-max). Targets (checked for reservation+evict and recommended):
interactive TTFT p99 <= 1.5x unloaded (means) and <= 2x (worst seed) in every window; batch
output tokens/s >= 90 % of static-1.0 in idle windows and >= 75 % in bursts; <= 0.1 evictions per
interactive request; <= 2 % of batch tokens wasted.
"""
import json
import sys

WINDOWS = ("idle", "burst", "settled", "onset")
ARMS = ("static-1.0", "reservation+evict", "recommended")


def cell(mean, spread, digits=1):
    return f"{mean:.{digits}f} ({spread[0]:.{digits}f}-{spread[1]:.{digits}f})"


def misses(arm):
    """The targets `arm` (one arm of a report) misses, as short names: "TTFT <window>",
    "idle goodput", "burst goodput", "evictions", "waste"."""
    top, low = arm["classes"][0], arm["classes"][-1]
    out = []
    for w in WINDOWS:
        win = top["windows"][w]
        if win["ttftP99OverUnloaded"] > 1.5 or win["spread"]["ttftP99OverUnloaded"][1] > 2.0:
            out.append(f"TTFT {w}")
    if low["windows"]["idle"]["outputTokensPctOfStatic"] < 90:
        out.append("idle goodput")
    if low["windows"]["burst"]["outputTokensPctOfStatic"] < 75:
        out.append("burst goodput")
    if arm["evictionsPerTopRequest"] > 0.1:
        out.append("evictions")
    if low["wastedPct"] > 2:
        out.append("waste")
    return out


def main():
    print("| scenario | detector | arm | TTFT x idle | x burst | x settled | x onset | batch % idle "
          "| batch % burst | evictions / interactive | batch wasted % | misses |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        for report in d["reports"]:
            arms = {a["name"]: a for a in report["arms"]}
            for name in ARMS:
                a = arms.get(name)
                if a is None:
                    continue
                top, low = a["classes"][0], a["classes"][-1]
                cells = []
                for w in WINDOWS:
                    win = top["windows"][w]
                    cells.append(cell(win["ttftP99OverUnloaded"],
                                      win["spread"]["ttftP99OverUnloaded"]))
                for w in ("idle", "burst"):
                    win = low["windows"][w]
                    cells.append(cell(win["outputTokensPctOfStatic"],
                                      win["spread"]["outputTokensPctOfStatic"]))
                cells.append(cell(a["evictionsPerTopRequest"],
                                  a["spread"]["evictionsPerTopRequest"], 3))
                cells.append(cell(low["wastedPct"], low["spread"]["wastedPct"], 2))
                miss = "-" if name == "static-1.0" else (", ".join(misses(a)) or "none")
                print(f"| {d['scenario']} | {report['detector']} | {name} | " + " | ".join(cells) +
                      f" | {miss} |")


if __name__ == "__main__":
    main()
