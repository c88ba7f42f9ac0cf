#!/usr/bin/env python3
"""The restoration-budget tables of docs/guide/eviction.md ("Restoration budgets").

Each DIR holds one `holdback simulate --format json --detector both --arms recommended` report per
scenario for one budget setting, named <scenario>-<seeds>.json (SEEDS in the environment, default
1-5): the two traces, the five synthetic built-ins and the six small pools of
`scripts/dev/sim_pool_sweep.py small-scenarios`.

    for s in azure-code azure-conv default burst-after-idle short-bursts kv-bound mixed-pool \
             SMALL/kv-*.json; do
      holdback simulate --scenario $s --seeds 1-5 --detector both --arms recommended \
        --format json --eviction-budget 0.08,20 > B08/$(basename $s .json)-1-5.json
    done
    scripts/dev/sim_budget_table.py "none=NONE" "B 0.08, burst 20=B08" ...

Per setting: the traces' rows, then one row for the synthetic scenarios and the small pools;
every figure is the worse of the two detectors: mean over the seeds (worst seed).
"""
import json, sys, glob, os
def load(d):
    out = {}
    for p in glob.glob(d + "/*-" + os.environ.get("SEEDS", "1-5") + ".json"):
        r = json.load(open(p))
        sc = os.path.basename(r["scenario"]).replace(".json", "")
        for det in r["reports"]:
            for a in det["arms"]:
                if a["name"] != "recommended": continue
                out.setdefault(sc, []).append(a)
    return out
def top(a): return max(a["classes"], key=lambda c: c["priority"])
def low(a): return min(a["classes"], key=lambda c: c["priority"])
def mx(arms, get, key):
    m = max(get(a)[key] for a in arms if get(a) is not None)
    w = max(get(a)["spread"][key][1] for a in arms if get(a) is not None)
    return m, w
def mn(arms, get, key):
    m = min(get(a)[key] for a in arms)
    w = min(get(a)["spread"][key][0] for a in arms)
    return m, w
def fmt(t, d=1): return f"{t[0]:.{d}f} ({t[1]:.{d}f})"
TR = ["azure-code", "azure-conv"]
SY = ["default", "burst-after-idle", "short-bursts", "kv-bound", "mixed-pool"]
SM = ["kv-2x4-1500", "kv-2x4-4000", "kv-2x6-1000", "kv-2x6-4000", "kv-4x8-1000", "kv-4x8-4000"]
print("| setting | scenario | TTFT p99 x unl. | worst minute | batch % static-1.0 | evictions / interactive | batch wasted % |")
print("|---|---|---|---|---|---|---|")
sets = [a.split("=", 1) for a in sys.argv[1:]]
data = [(l, load(d)) for l, d in sets]
for sc in TR:
    for l, D in data:
        A = D[sc]
        print(f"| {l} | {sc} | {fmt(mx(A, lambda a: top(a)['windows']['all'], 'ttftP99OverUnloaded'))} | "
              f"{fmt(mx(A, lambda a: top(a)['windows']['worstMinute'], 'ttftP99OverUnloaded'))} | "
              f"{fmt(mn(A, lambda a: low(a)['windows']['all'], 'outputTokensPctOfStatic'), 0)} | "
              f"{fmt(mx(A, lambda a: a, 'evictionsPerTopRequest'), 3)} | {fmt(mx(A, lambda a: low(a), 'wastedPct'), 2)} |")
print()
print("| setting | synthetic: worst onset | synthetic: worst burst | synthetic: evictions / interactive | synthetic: wasted % | small pools: worst window | small pools: idle batch % |")
print("|---|---|---|---|---|---|---|")
for l, D in data:
    S = [a for sc in SY for a in D[sc]]
    M = [a for sc in SM for a in D[sc]]
    def worstwin(a):
        w = top(a)["windows"]
        return max(w[k]["ttftP99OverUnloaded"] for k in ("idle", "burst", "onset")), max(w[k]["spread"]["ttftP99OverUnloaded"][1] for k in ("idle", "burst", "onset"))
    ww = (max(worstwin(a)[0] for a in M), max(worstwin(a)[1] for a in M))
    print(f"| {l} | {fmt(mx(S, lambda a: top(a)['windows']['onset'], 'ttftP99OverUnloaded'))} | "
          f"{fmt(mx(S, lambda a: top(a)['windows']['burst'], 'ttftP99OverUnloaded'))} | "
          f"{fmt(mx(S, lambda a: a, 'evictionsPerTopRequest'), 3)} | {fmt(mx(S, lambda a: low(a), 'wastedPct'), 2)} | "
          f"{fmt(ww)} | {fmt(mn(M, lambda a: low(a)['windows']['idle'], 'outputTokensPctOfStatic'), 0)} |")
