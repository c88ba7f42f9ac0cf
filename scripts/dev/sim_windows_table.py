#!/usr/bin/env python3
"""Per-window table of `holdback simulate --format json` reports (docs/results/policies.md).

For every arm: the top class's TTFT p99 over its unloaded p99 in the idle, burst, settled (burst
after its first 2 s) and onset windows, and the lowest class's output tokens as % of static-1.0
in the idle and burst windows; each as mean (min-max over seeds), as markdown table rows.

    holdback simulate --scenario S --seeds 1-5 --arms ... --format json > S.json
    scripts/dev/sim_windows_table.py S.json [more.json ...]
"""
import json
import sys


def cell(window, key):
    if window is None or window.get(key) is None:
        return "-"
    lo, hi = window["spread"][key]
    return f"{window[key]:.1f} ({lo:.1f}-{hi:.1f})"


def main(paths):
    print("| scenario | detector | arm | TTFT x idle | TTFT x burst | TTFT x settled | TTFT x onset "
          "| batch % idle | batch % burst |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        for detector in report["reports"]:
            for arm in detector["arms"]:
                top = arm["classes"][0]["windows"]
                low = arm["classes"][-1]["windows"]
                ttft = [cell(top.get(w), "ttftP99OverUnloaded")
                        for w in ("idle", "burst", "settled", "onset")]
                batch = [cell(low.get(w), "outputTokensPctOfStatic") for w in ("idle", "burst")]
                print("| " + " | ".join([report["scenario"], detector["detector"], arm["name"]]
                                        + ttft + batch) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
