#!/usr/bin/env python3
"""Writes a stand-in for a long-context trace and a mixed-pool scenario that plays it.

    scripts/dev/long-context-standin.py DIR
    holdback simulate --scenario DIR/long.yaml --seeds 1-3 --arms recommended,static-1.0,none \
        --detector both --detail

DIR/long.jsonl: 23,000 arrivals in the `mooncake` format (Poisson, 4 a second), input tokens
log-normal (median about 8,100, capped at 120,000), outputs uniform in 1-600. DIR/long.yaml: the
trace as the protected class on a pool of 2 large endpoints (16 slots, 131,072 KV tokens, prefill
0.02 ms a token) and 2 small ones (8 slots, 49,152 KV tokens, prefill 0.05 ms a token, decode
steps of 8 ms), with the built-ins' batch backlog behind it (docs/results/mixed-pools.md).
"""
import json
import os
import random
import sys

SCENARIO = """durationSeconds: 600
pool:
  groups:
    - {endpoints: 2, slots: 16, kvCapacityTokens: 131072, prefillPerTokenMs: 0.02}
    - {endpoints: 2, slots: 8, kvCapacityTokens: 49152, prefillPerTokenMs: 0.05, tpotBaseMs: 8}
classes:
  - name: interactive
    priority: 100
    ttlSeconds: 30
    arrival: {process: trace, file: long.jsonl, format: mooncake}
  - name: batch
    priority: -1
    arrival: {process: backlog, backlog: 200, rampSeconds: 10}
    inputTokens: {distribution: uniform, min: 256, max: 2048}
    outputTokens: {distribution: uniform, min: 64, max: 512}
"""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    random.seed(3)
    t = 0.0
    with open(os.path.join(out, "long.jsonl"), "w") as f:
        for _ in range(23000):
            t += random.expovariate(4.0) * 1000
            inp = int(min(120000, random.lognormvariate(9.0, 1.0)))
            f.write(json.dumps({"timestamp": int(t), "input_length": inp,
                                "output_length": random.randint(1, 600)}) + "\n")
    with open(os.path.join(out, "long.yaml"), "w") as f:
        f.write(SCENARIO)


if __name__ == "__main__":
    main()
