#!/usr/bin/env python3
"""Where a reservation arm's idle goodput goes and how close its burst onsets come to the settled
window (docs/simulation.md).

Reads the `--csv` directories of one seed each (intervals.csv every 100 ms, requests.csv) of a
scenario whose first class is on for ON seconds after OFF seconds idle, period ON + OFF
(short-bursts: --off 25 --on 5). Prints per directory and arm: the mean reserve of the lowest
class and the free slots (slots - running) in the first 5 s of each idle window after a burst and
in the rest, and per burst the onset drain end: the arrival time (s into the burst) of its last
top-class request with TTFT above 1.5x the unloaded p99 (`--unloaded-ms`, 31) inside the burst.

    for s in 1 2 3 4 5; do
      holdback simulate --scenario short-bursts --seed $s --detector concurrency \\
        --arms static-1.0,reservation,reservation-0.1% --csv sb-$s
    done
    scripts/dev/sim_burst_phases.py --off 25 --on 5 --arms reservation,reservation-0.1% sb-[1-5]
"""
import argparse
import csv
import os
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--off", type=float, required=True)
    ap.add_argument("--on", type=float, required=True)
    ap.add_argument("--arms", required=True)
    ap.add_argument("--slots", type=float, default=64.0)
    ap.add_argument("--measured", type=float, default=300.0)
    ap.add_argument("--unloaded-ms", type=float, default=31.0)
    args = ap.parse_args()
    period = args.off + args.on
    for arm in args.arms.split(","):
        drains = []
        for d in args.dirs:
            early_r, late_r, early_free, late_free = [], [], 0.0, 0.0
            with open(os.path.join(d, "intervals.csv"), encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            low = [k for k in rows[0] if k.startswith("reserve_")][-1]
            for r in rows:
                t = float(r["time_s"])
                if r["arm"] != arm or t < period or t >= args.measured:
                    continue
                phase = t % period
                if phase >= args.off:
                    continue
                free = (args.slots - float(r["running"])) * 0.1
                if phase < 5.0:
                    early_r.append(float(r[low]))
                    early_free += free
                else:
                    late_r.append(float(r[low]))
                    late_free += free
            print(f"{d} {arm}: {low} first 5 s of idle {statistics.mean(early_r):.1f}, "
                  f"rest {statistics.mean(late_r):.1f}; free slot-seconds first 5 s "
                  f"{early_free:.0f}, rest {late_free:.0f} "
                  f"({100 * early_free / (early_free + late_free):.0f} % in the first 5 s)")
            last = {}
            with open(os.path.join(d, "requests.csv"), encoding="utf-8") as f:
                requests = list(csv.DictReader(f))
            top = max(int(r["priority"]) for r in requests)
            for r in requests:
                t = float(r["arrival_s"])
                if r["arm"] != arm or int(r["priority"]) != top or t >= args.measured:
                    continue
                into = t % period - args.off
                if 0 <= into < args.on and float(r["ttft_ms"]) > 1.5 * args.unloaded_ms:
                    burst = int(t // period)
                    last[burst] = max(last.get(burst, 0.0), into)
            bursts = int(args.measured // period)
            drains += [last.get(b, 0.0) for b in range(bursts)]
        drains.sort()
        n = len(drains)
        print(f"{arm}: onset drain end over {n} bursts: median {drains[n // 2]:.2f} s, "
              f"p90 {drains[int(n * 0.9)]:.2f} s, max {drains[-1]:.2f} s; "
              f"past 2 s (into the settled window): {sum(x >= 2.0 for x in drains)}")


if __name__ == "__main__":
    main()
