#!/usr/bin/env python3
"""The recommended arm with gateway replicas against ONE gateway's static-1.0 (docs/results/replicas.md,
"The replica feed"): batch output tokens/s as a % of static-1.0 run with a
single gateway on the same scenario and seeds, rather than of static-1.0 run with the same
replicas (which is no longer strict priority across the pool).

    S=kv-bound
    build/default/holdback simulate --scenario $S --seeds 1-10 --arms static-1.0,recommended \\
        --detector utilization --format json > one.json
    for R in 4 8; do
      build/default/holdback simulate --scenario $S --seeds 1-10 --arms static-1.0,recommended \\
          --detector utilization --replicas $R --sync-ms 1 --format json > r$R.json
    done
    scripts/dev/sim_replica_reference.py one.json r4.json r8.json

Each row: the interactive class's TTFT p99 as a multiple of unloaded in its worst window (mean
over seeds, and the worst seed in any window), batch % of the one-gateway static-1.0 in idle
windows and in bursts (mean, and with --spread the seeds' min-max against the same reference),
evictions per interactive request (with --spread its min-max), % of batch tokens wasted, and the batch
requests that expired in a queue (the 60 s default TTL) per run, and the largest server queue of
a run (mean over seeds; 1: no request ever waited on a server behind another). The mode column
is the replicas' pool.replicaMode (share or reserve). Pass the one-gateway file among the replica
files too for its own row.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_recommended_table import WINDOWS  # noqa: E402  (the windows, beside this script)


def arms(path):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    report = d["reports"][0]
    return d, {a["name"]: a for a in report["arms"]}


def main():
    argv = [a for a in sys.argv if a != "--spread"]
    spread = len(argv) != len(sys.argv)
    if len(argv) < 3:
        sys.exit("usage: sim_replica_reference.py [--spread] ONE_GATEWAY.json REPLICAS.json...")
    sys.argv = argv
    one, one_arms = arms(sys.argv[1])
    if "static-1.0" not in one_arms:
        sys.exit(f"{sys.argv[1]}: no static-1.0 arm")
    ref = one_arms["static-1.0"]["classes"][-1]["windows"]
    print("| scenario | replicas | mode | interactive TTFT p99 x unloaded, worst window (worst seed) "
          "| batch % of one gateway's static-1.0, idle / burst | evictions / interactive "
          "| batch wasted % | batch expired in a queue, per run | largest server queue |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sys.argv[2:]:
        d, by_name = arms(path)
        if d["scenario"] != one["scenario"] or d["seeds"] != one["seeds"]:
            sys.exit(f"{path}: another scenario or seed set than {sys.argv[1]}")
        a = by_name.get("recommended")
        if a is None:
            sys.exit(f"{path}: no recommended arm")
        top, low = a["classes"][0]["windows"], a["classes"][-1]
        mean = max(top[w]["ttftP99OverUnloaded"] for w in WINDOWS)
        worst = max(top[w]["spread"]["ttftP99OverUnloaded"][1] for w in WINDOWS)
        pct = [100.0 * low["windows"][w]["outputTokensPerSec"] / ref[w]["outputTokensPerSec"]
               for w in ("idle", "burst")]
        batch = f"{pct[0]:.1f} / {pct[1]:.1f}"
        evictions = f"{a['evictionsPerTopRequest']:.3f}"
        if spread:
            ranges = [[100.0 * v / ref[w]["outputTokensPerSec"]
                       for v in low["windows"][w]["spread"]["outputTokensPerSec"]]
                      for w in ("idle", "burst")]
            batch = (f"{pct[0]:.1f} ({ranges[0][0]:.1f}-{ranges[0][1]:.1f}) / "
                     f"{pct[1]:.1f} ({ranges[1][0]:.1f}-{ranges[1][1]:.1f})")
            lo, hi = a["spread"]["evictionsPerTopRequest"]
            evictions += f" ({lo:.3f}-{hi:.3f})"
        mode = d.get("replicaMode", "share") if d["gatewayReplicas"] > 1 else "-"
        print(f"| `{d['scenario']}` | {d['gatewayReplicas']} | {mode} | {mean:.2f} ({worst:.2f}) "
              f"| {batch} | {evictions} "
              f"| {low['wastedPct']:.2f} | {low['evicted']:.0f} "
              f"| {a['signal']['maxServerQueue']:.1f} |")


if __name__ == "__main__":
    main()
