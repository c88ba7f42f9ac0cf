#!/usr/bin/env python3
"""Where an arm holds capacity back: the pool over time from `holdback simulate --csv DIR`.

Reads intervals.csv and requests.csv of one or more --csv directories (each holds its first
seed's runs, so run one seed per directory) and prints one markdown row per arm with, over the
directories, the mean and (min-max) of:

  - run.: requests running on the servers, mean over the 100 ms intervals;
  - free slots: the pool's free slots, mean;
  - free KV %: the pool's free KV tokens as % of --kv-tokens (the pool's total), mean;
  - reserve: the reserve kept below the lowest class, in slots ((1 - ceiling) x slots), mean;
  - top in flight: the top class's requests between arrival and finish, mean and p99;
  - growth p98: the rise of the top class's requests in flight over the next H seconds (the
    most it reaches within H, less what it is now), 98th percentile over the intervals, H = the
    mean service time of the lowest class's completed requests (dispatch to finish);
  - corr: the correlation of the reserve with that rise (does the reserve track what comes?);
  - revoked: the lowest class's requests revoked by in-flight eviction;
  - victim age: mean time from dispatch to the revocation decision of those (their end less
    --revocation-ms, the pool's revocationLatencyMs, default 50); youngest: the mean age of the
    youngest of the lowest class's requests running at that moment (the least a victim could
    have lost).

    for k in 1 2 3 4 5; do
      holdback simulate --scenario azure-conv --seeds $k --detector concurrency \\
        --arms recommended,oracle --csv out-$k > /dev/null
    done
    scripts/dev/sim_pool_occupancy.py --kv-tokens 65536 out-{1..5}
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

STEP = 0.1  # intervals.csv's spacing, seconds


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def corr(x, y):
    mx, my = statistics.mean(x), statistics.mean(y)
    sx = math.sqrt(sum((a - mx) ** 2 for a in x))
    sy = math.sqrt(sum((b - my) ** 2 for b in y))
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / (sx * sy) if sx and sy else 0.0


def num(value):
    return float(value) if value not in ("", None) else 0.0


def arm_figures(rows, requests, kv_tokens, revocation_s):
    top_prio = max(int(r["priority"]) for r in requests)
    low_prio = min(int(r["priority"]) for r in requests)
    low_name = next(r["class"] for r in requests if int(r["priority"]) == low_prio)
    reserve_key = "reserve_" + low_name
    n = len(rows)
    occupancy = [0] * n
    for r in requests:
        if int(r["priority"]) != top_prio:
            continue
        a = float(r["arrival_s"])
        b = num(r["finished_s"]) or a
        for t in range(int(a / STEP), min(n, int(b / STEP) + 1)):
            occupancy[t] += 1
    low_done = [num(r["finished_s"]) - num(r["dispatched_s"]) for r in requests
                if int(r["priority"]) == low_prio and r["outcome"] == "completed"
                and r["dispatched_s"]]
    horizon = statistics.mean(low_done) if low_done else 1.0
    h = max(1, int(round(horizon / STEP)))
    growth = [max(occupancy[t:t + h + 1]) - occupancy[t] for t in range(n - h)]
    reserve = [num(r.get(reserve_key)) for r in rows]
    running_low = [(num(r["dispatched_s"]), num(r["finished_s"]) or 1e18) for r in requests
                   if int(r["priority"]) == low_prio and r["dispatched_s"]]
    revoked = [r for r in requests if int(r["priority"]) == low_prio and r["outcome"] == "revoked"]
    ages, youngest = [], []
    for r in revoked:
        start, at = num(r["dispatched_s"]), num(r["finished_s"]) - revocation_s
        ages.append(at - start)
        alive = [at - d for d, f in running_low if d <= at < f]
        if alive:
            youngest.append(min(alive))
    return {
        "run.": statistics.mean(num(r["running"]) for r in rows),
        "free slots": statistics.mean(num(r["free_slots"]) for r in rows),
        "free KV %": (100 * statistics.mean(num(r["free_kv_tokens"]) for r in rows) / kv_tokens
                      if kv_tokens else float("nan")),
        "reserve": statistics.mean(reserve),
        "top in flight": statistics.mean(occupancy),
        "top p99": quantile(occupancy, 0.99),
        "H s": horizon,
        "growth p98": quantile(growth, 0.98),
        "corr": corr(reserve[:n - h], growth) if len(growth) > 1 else 0.0,
        "revoked": len(revoked),
        "victim age s": statistics.mean(ages) if ages else float("nan"),
        "youngest s": statistics.mean(youngest) if youngest else float("nan"),
    }


def main(argv):
    kv_tokens, revocation_s = 0.0, 0.05
    while len(argv) >= 2 and argv[0] in ("--kv-tokens", "--revocation-ms"):
        if argv[0] == "--kv-tokens":
            kv_tokens = float(argv[1])
        else:
            revocation_s = float(argv[1]) / 1000
        argv = argv[2:]
    if not argv:
        sys.exit(__doc__)
    per_arm = defaultdict(list)
    for directory in argv:
        rows, requests = defaultdict(list), defaultdict(list)
        with open(directory + "/intervals.csv", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                rows[r["arm"]].append(r)
        with open(directory + "/requests.csv", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                requests[r["arm"]].append(r)
        for arm in rows:
            per_arm[arm].append(arm_figures(rows[arm], requests[arm], kv_tokens, revocation_s))
    keys = list(next(iter(per_arm.values()))[0].keys())
    print("| arm | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for arm, figures in per_arm.items():
        cells = []
        for k in keys:
            values = [f[k] for f in figures if not math.isnan(f[k])]
            if not values:
                cells.append("-")
                continue
            digits = 0 if k in ("revoked", "free KV %") else 2 if k == "corr" else 1
            mean = f"{statistics.mean(values):.{digits}f}"
            cells.append(mean if len(values) == 1 else
                         f"{mean} ({min(values):.{digits}f}-{max(values):.{digits}f})")
        print(f"| {arm} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
