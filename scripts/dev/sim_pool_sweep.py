#!/usr/bin/env python3
"""The pool sweeps of docs/results/recommended.md, "Pools of other sizes and KV per slot" and
"Small pools".

    scripts/dev/sim_pool_sweep.py scenarios DIR   # writes DIR/kv-<N>x<S>-<KV>.json
    for f in DIR/kv-*x16-*.json; do
      build/default/holdback simulate --scenario $f --seeds 1-3 --detector both \\
        --arms none,static-1.0,reservation+evict,recommended --format json > ${f%.json}.out
    done
    scripts/dev/sim_pool_sweep.py table DIR       # the recommended arm's table and its misses

    scripts/dev/sim_pool_sweep.py small-scenarios DIR
    for f in DIR/kv-*.json; do
      build/default/holdback simulate --scenario $f --seeds 1-5 --detector both \\
        --arms none,static-1.0,recommended,oracle --format json > ${f%.json}.out
    done
    scripts/dev/sim_pool_sweep.py small-table DIR # recommended beside the oracle (the limit)
    ARMS=recommended,stepwise scripts/dev/sim_pool_sweep.py small-table DIR  # other arms' rows

The scenarios are the built-in kv-bound traffic scaled to the pool: N servers of S slots, KV per
slot 1000, 2000 or 4000 tokens, every arrival rate and the batch backlog x (N x S) / 64.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_recommended_table import misses  # noqa: E402  (the targets, beside this script)

POOLS = (2, 4, 16)
KV_PER_SLOT = (1000, 2000, 4000)
# The small pools (servers, slots each, KV tokens per slot): 2 x 6 with a 6k-token KV cache is a
# team with two small GPUs; no server holds less than 6000 tokens, so that every batch request
# (at most 4608 tokens) fits one.
SMALL = ((2, 4, (1500, 4000)), (2, 6, (1000, 4000)), (4, 8, (1000, 4000)))


def scenario(n, kv, slots=16):
    f = n * slots / 64.0
    return {
        "durationSeconds": 180,
        "pool": {"endpoints": n, "slots": slots, "kvCapacityTokens": kv * slots},
        "classes": [
            {"name": "interactive", "priority": 100,
             "arrival": {"process": "on-off", "rate": 24 * f, "offRate": 1 * f, "onSeconds": 30,
                         "offSeconds": 30, "startWith": "off"},
             "inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}, "ttlSeconds": 30},
            {"name": "standard", "priority": 50, "arrival": {"process": "poisson", "rate": 3 * f},
             "inputTokens": {"mean": 1024}, "outputTokens": {"mean": 256}, "ttlSeconds": 60},
            {"name": "batch", "priority": -1,
             "arrival": {"process": "backlog", "backlog": int(round(400 * f)), "rampSeconds": 10},
             "inputTokens": {"distribution": "uniform", "min": 1024, "max": 4096},
             "outputTokens": {"distribution": "uniform", "min": 64, "max": 512}},
        ],
    }


def goodput(win):
    """The lowest class's goodput in one window: the mean over seeds (min-max)."""
    lo, hi = win["spread"]["outputTokensPctOfStatic"]
    return f"{win['outputTokensPctOfStatic']:.1f} ({lo:.0f}-{hi:.0f})"


def reports(directory, pools):
    """(servers, slots, KV per slot, report) for every report of the runs written for `pools`."""
    for n, slots, kvs in pools:
        for kv in kvs:
            path = os.path.join(directory, f"kv-{n}x{slots}-{kv}.out")
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                continue
            with open(path, encoding="utf-8") as f:
                for r in json.load(f)["reports"]:
                    yield n, slots, kv, r


def table(directory):
    print("| pool | KV/slot | detector | TTFT x idle / burst / onset (worst seed) | batch % idle "
          "| batch % burst | evictions / interactive | wasted % | misses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, _, kv, r in reports(directory, [(n, 16, KV_PER_SLOT) for n in POOLS]):
        for a in r["arms"]:
            if a["name"] != "recommended":
                continue
            top, low = a["classes"][0], a["classes"][-1]

            def ttft(w):
                win = top["windows"][w]
                worst = win["spread"]["ttftP99OverUnloaded"][1]
                return f"{win['ttftP99OverUnloaded']:.1f}" + (
                    f" ({worst:.1f})" if worst >= 1.05 else "")

            cells = " / ".join(ttft(w) for w in ("idle", "burst", "onset"))
            idle, burst = low["windows"]["idle"], low["windows"]["burst"]
            evictions, wasted = a["evictionsPerTopRequest"], low["wastedPct"]
            miss = [m for m in misses(a) if m != "TTFT settled"]
            print(f"| {n}x16 | {kv} | {r['detector']} | {cells} | {goodput(idle)} | "
                  f"{goodput(burst)} | {evictions:.3f} | {wasted:.2f} | "
                  f"{', '.join(miss) or '-'} |")


def small_table(directory):
    """Per small pool and detector: recommended and the oracle side by side (the top class's worst
    window on the mean and its worst seed; the lowest class's goodput in idle windows)."""
    print("| pool | KV/slot | detector | arm | TTFT x worst window (worst seed) | batch % idle "
          "| batch % burst | evictions / interactive | wasted % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, slots, kv, r in reports(directory, SMALL):
        arms = {a["name"]: a for a in r["arms"]}
        for name in os.environ.get("ARMS", "recommended,oracle").split(","):
            a = arms.get(name)
            if a is None:
                continue
            top, low = a["classes"][0], a["classes"][-1]
            wins = [top["windows"][w] for w in ("idle", "burst", "onset")]
            mean = max(w["ttftP99OverUnloaded"] for w in wins)
            worst = max(w["spread"]["ttftP99OverUnloaded"][1] for w in wins)

            print(f"| {n}x{slots} | {kv} | {r['detector']} | {name} | {mean:.2f} "
                  f"({worst:.2f}) | {goodput(low['windows']['idle'])} | "
                  f"{goodput(low['windows']['burst'])} | {a['evictionsPerTopRequest']:.3f} "
                  f"| {low['wastedPct']:.2f} |")


def write_scenarios(directory, pools):
    os.makedirs(directory, exist_ok=True)
    for n, slots, kvs in pools:
        for kv in kvs:
            with open(os.path.join(directory, f"kv-{n}x{slots}-{kv}.json"), "w",
                      encoding="utf-8") as f:
                json.dump(scenario(n, kv, slots), f)


def main():
    modes = ("scenarios", "table", "small-scenarios", "small-table")
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        raise SystemExit("usage: sim_pool_sweep.py " + "|".join(modes) + " DIR")
    if sys.argv[1] == "scenarios":
        write_scenarios(sys.argv[2], [(n, 16, KV_PER_SLOT) for n in POOLS])
    elif sys.argv[1] == "small-scenarios":
        write_scenarios(sys.argv[2], SMALL)
    elif sys.argv[1] == "small-table":
        small_table(sys.argv[2])
    else:
        table(sys.argv[2])


if __name__ == "__main__":
    main()
