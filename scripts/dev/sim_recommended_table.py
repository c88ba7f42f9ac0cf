#!/usr/bin/env python3
"""The table of docs/simulation.md, "The recommended configuration", from `holdback simulate
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
                misses = []
                for w in WINDOWS:
                    win = top["windows"][w]
                    spread = win["spread"]["ttftP99OverUnloaded"]
                    cells.append(cell(win["ttftP99OverUnloaded"], spread))
                    if win["ttftP99OverUnloaded"] > 1.5 or spread[1] > 2.0:
                        misses.append(f"TTFT {w}")
                goodput = {}
                for w in ("idle", "burst"):
                    win = low["windows"][w]
                    goodput[w] = win["outputTokensPctOfStatic"]
                    cells.append(cell(goodput[w], win["spread"]["outputTokensPctOfStatic"]))
                evictions = a["evictionsPerTopRequest"]
                cells.append(cell(evictions, a["spread"]["evictionsPerTopRequest"], 3))
                wasted = low["wastedPct"]
                cells.append(cell(wasted, low["spread"]["wastedPct"], 2))
                if goodput["idle"] < 90:
                    misses.append("idle goodput")
                if goodput["burst"] < 75:
                    misses.append("burst goodput")
                if evictions > 0.1:
                    misses.append("evictions")
                if wasted > 2:
                    misses.append("waste")
                miss = "-" if name == "static-1.0" else (", ".join(misses) or "none")
                print(f"| {d['scenario']} | {report['detector']} | {name} | " + " | ".join(cells) +
                      f" | {miss} |")


if __name__ == "__main__":
    main()
