#!/usr/bin/env python3
"""The pool sweep of docs/results/recommended.md, "Pools of other sizes and KV per slot".

    scripts/dev/sim_pool_sweep.py scenarios DIR   # writes DIR/kv-<N>x16-<KV>.json
    for f in DIR/kv-*x16-*.json; do
      build/default/holdback simulate --scenario $f --seeds 1-3 --detector both \\
        --arms none,static-1.0,reservation+evict,recommended --format json > ${f%.json}.out
    done
    scripts/dev/sim_pool_sweep.py table DIR       # the recommended arm's table and its misses

The scenarios are the built-in kv-bound traffic scaled to the pool: N servers of 16 slots, KV per
slot 1000, 2000 or 4000 tokens, every arrival rate and the batch backlog x (N x 16) / 64.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_recommended_table import misses  # noqa: E402  (the targets, beside this script)

POOLS = (2, 4, 16)
KV_PER_SLOT = (1000, 2000, 4000)


def scenario(n, kv):
    f = n * 16 / 64.0
    return {
        "durationSeconds": 180,
        "pool": {"endpoints": n, "slots": 16, "kvCapacityTokens": kv * 16},
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


def table(directory):
    print("| pool | KV/slot | detector | TTFT x idle / burst / onset (worst seed) | batch % idle "
          "| batch % burst | evictions / interactive | wasted % | misses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in POOLS:
        for kv in KV_PER_SLOT:
            path = os.path.join(directory, f"kv-{n}x16-{kv}.out")
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                continue
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
            for r in d["reports"]:
                for a in r["arms"]:
                    if a["name"] != "recommended":
                        continue
                    top, low = a["classes"][0], a["classes"][-1]

                    def ttft(w):
                        win = top["windows"][w]
                        worst = win["spread"]["ttftP99OverUnloaded"][1]
                        return f"{win['ttftP99OverUnloaded']:.1f}" + (
                            f" ({worst:.1f})" if worst >= 1.05 else "")

                    def goodput(win):
                        lo, hi = win["spread"]["outputTokensPctOfStatic"]
                        return f"{win['outputTokensPctOfStatic']:.1f} ({lo:.0f}-{hi:.0f})"

                    cells = " / ".join(ttft(w) for w in ("idle", "burst", "onset"))
                    idle, burst = low["windows"]["idle"], low["windows"]["burst"]
                    evictions, wasted = a["evictionsPerTopRequest"], low["wastedPct"]
                    miss = [m for m in misses(a) if m != "TTFT settled"]
                    print(f"| {n}x16 | {kv} | {r['detector']} | {cells} | {goodput(idle)} | "
                          f"{goodput(burst)} | {evictions:.3f} | {wasted:.2f} | "
                          f"{', '.join(miss) or '-'} |")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("scenarios", "table"):
        raise SystemExit("usage: sim_pool_sweep.py scenarios|table DIR")
    if sys.argv[1] == "scenarios":
        os.makedirs(sys.argv[2], exist_ok=True)
        for n in POOLS:
            for kv in KV_PER_SLOT:
                with open(os.path.join(sys.argv[2], f"kv-{n}x16-{kv}.json"), "w",
                          encoding="utf-8") as f:
                    json.dump(scenario(n, kv), f)
    else:
        table(sys.argv[2])


if __name__ == "__main__":
    main()
