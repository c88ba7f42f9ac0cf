#!/usr/bin/env python3
"""The KV-bound capacity e2e's exchange (tests/e2e/gateway_capacity_e2e_test.cpp, default gateway
only), repeated, with both servers' and the gateway's /metrics sampled every ~30 ms: measures how
often the stall in docs/performance/gateway.md ("A stall on a KV-bound pool") happens, and keeps each run's timeline.

  scripts/dev/kv-stall-trace.py BUILD_DIR [RUNS] [OUT_DIR]    e.g. build/asan 10 /tmp/kv-stall
  scripts/dev/kv-stall-trace.py --show OUT_DIR/run-N.json       one run's timeline

GATEWAY_ARGS (environment): more arguments for the gateway, split at spaces (e.g. --config FILE).

Two holdback-model-servers (8 slots, 1000 KV tokens, 10 ms per token, 20 ms prefill), the gateway
with no flags but --endpoint, 16 closed-loop batch clients (248 tokens), then 120 interactive
requests (8 tokens) one every 40 ms. Per run it prints the interactive p50/p99/max and the batch
requests answered 200 and evicted (429); a p99 above 300 ms is a stall. Standard library only.
"""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time


def start(argv, log):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    m = re.search(r"(\d+\.\d+\.\d+\.\d+):(\d+)", p.stdout.readline())
    if not m:
        sys.exit(f"{argv[0]} did not print its address (log: {log})")
    return p, int(m.group(2))


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    return c.getresponse().read().decode()


def post(c, objective, tokens, flow):
    body = json.dumps({"model": "fake-model", "prompt": "b" if objective == "batch" else "i",
                       "max_tokens": tokens})
    c.request("POST", "/v1/completions", body,
              {"content-type": "application/json", "x-gateway-inference-objective": objective,
               "x-gateway-inference-fairness-id": flow})
    r = c.getresponse()
    r.read()
    return r.status


def total(text, prefix):
    """The sum of the samples whose line starts with `prefix` (a metric name, or a name and the
    start of its labels, e.g. 'x{priority="10"')."""
    out = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(prefix):
            continue
        rest = line[len(prefix):]
        if "{" not in prefix and not rest.startswith(("{", " ")):
            continue  # another metric whose name begins with this one
        out += float(line.rsplit(" ", 1)[1])
    return out


def one_run(build, out_dir, n):
    ex = os.path.join(build, "examples")
    servers = [start([os.path.join(ex, "model-server/holdback-model-server"), "--port", "0",
                      "--slots", "8", "--token-ms", "10", "--prefill-ms", "20",
                      "--kv-capacity-tokens", "1000"], os.path.join(out_dir, f"server-{n}-{k}.log"))
               for k in range(2)]
    argv = [os.path.join(ex, "gateway/holdback-gateway"), "--listen", "127.0.0.1:0"]
    for _, port in servers:
        argv += ["--endpoint", f"http://127.0.0.1:{port}"]
    argv += os.environ.get("GATEWAY_ARGS", "").split()
    gw, gport = start(argv, os.path.join(out_dir, f"gateway-{n}.log"))
    time.sleep(0.2)
    t0 = time.time()
    events, samples, lock = [], [], threading.Lock()
    on, sampling = [True], [True]

    def batch(i):
        time.sleep(i * 0.005)
        c = http.client.HTTPConnection("127.0.0.1", gport, timeout=60)
        while on[0]:
            t = time.time()
            status = post(c, "batch", 248, f"batch-{i}")
            with lock:
                events.append(["batch", i, t - t0, time.time() - t0, status])
            if status != 200:
                time.sleep(0.02)

    def sampler():
        while sampling[0]:
            row = {"t": time.time() - t0}
            for k, (_, port) in enumerate(servers):
                m = get(port, "/metrics")
                row[f"s{k}"] = [total(m, "vllm:num_requests_running"),
                                total(m, "vllm:num_requests_waiting"),
                                round(total(m, "vllm:kv_cache_usage_perc"), 3)]
            g = get(gport, "/metrics")
            row["q_top"] = total(g, 'holdback_flow_control_queue_size{priority="10"')
            row["saturation"] = total(g, 'holdback_flow_control_pool_saturation{stage="effective"')
            row["revocations"] = total(g, "holdback_flow_control_revocations_issued_total")
            row["reclaim_target"] = total(g, "holdback_flow_control_reclaim_target")
            samples.append(row)
            time.sleep(0.02)

    def interactive(i, begin):
        time.sleep(max(0.0, begin + i * 0.04 - time.time()))
        c = http.client.HTTPConnection("127.0.0.1", gport, timeout=30)
        t = time.time()
        status = post(c, "interactive", 8, "chat")
        with lock:
            events.append(["interactive", i, t - t0, time.time() - t0, status])

    threads = [threading.Thread(target=batch, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    s = threading.Thread(target=sampler)
    s.start()
    begin = time.time()
    stream = [threading.Thread(target=interactive, args=(i, begin)) for i in range(120)]
    for t in stream:
        t.start()
    for t in stream:
        t.join()
    sampling[0] = False
    s.join()
    on[0] = False
    for t in threads:
        t.join()
    for p in [gw] + [p for p, _ in servers]:
        p.terminate()
        p.wait()
    lat = sorted((e[3] - e[2]) * 1000 for e in events if e[0] == "interactive" and e[4] == 200)
    ok = sum(1 for e in events if e[0] == "batch" and e[4] == 200)
    evicted = sum(1 for e in events if e[0] == "batch" and e[4] == 429)
    path = os.path.join(out_dir, f"run-{n}.json")
    with open(path, "w") as f:
        json.dump({"events": events, "samples": samples}, f)
    if not lat:
        print(f"run {n}: no interactive request answered 200, counted as a stall  ({path})", flush=True)
        return True
    p99 = lat[max(0, -(-99 * len(lat) // 100) - 1)]  # nearest rank, as the e2e test's
    print(f"run {n}: interactive p50 {lat[len(lat) // 2]:.0f} p99 {p99:.0f} max {lat[-1]:.0f} ms "
          f"({len(lat)} answered 200); batch 200 {ok}, evicted {evicted}"
          f"{'  STALL' if p99 > 300 else ''}  ({path})", flush=True)
    return p99 > 300


def show(path):
    d = json.load(open(path))
    for r in d["samples"]:
        a, b = r["s0"], r["s1"]
        print(f"{r['t']:6.2f}  A run {a[0]:.0f} wait {a[1]:.0f} kv {a[2]:.2f} | B run {b[0]:.0f} "
              f"wait {b[1]:.0f} kv {b[2]:.2f} | top queue {r['q_top']:.0f} saturation "
              f"{r['saturation']:.3f} revocations {r['revocations']:.0f} reclaim target "
              f"{r['reclaim_target']:.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--show":
        show(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    out = sys.argv[3] if len(sys.argv) > 3 else "/tmp/kv-stall"
    os.makedirs(out, exist_ok=True)
    stalls = sum(one_run(build, out, n) for n in range(1, runs + 1))
    print(f"{stalls} of {runs} runs stalled")
