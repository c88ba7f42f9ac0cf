#!/usr/bin/env bash
# Builds holdback and runs its main job on the built-in default scenario:
#   holdback simulate   (a gateway in front of 4 x 16-slot LLM servers; interactive bursts, a
#                        standard class and a saturating batch backlog; every policy arm on the
#                        same seed; a compact summary per detector, --detail for every arm's
#                        tables; see docs/simulation.md)
# Extra arguments are passed to `holdback simulate`, e.g. scripts/run.sh --seed 2 --csv out/, or
# scripts/run.sh --scenario burst-after-idle --seeds 1-5 (every arm on 5 seeds, mean and min-max).
# With --plot DIR the Debian package gnuplot-nox is installed as well (to render the pictures).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
plot_packages=""
for arg in "$@"; do
  case "$arg" in --plot | --plot=*) plot_packages="gnuplot-nox" ;; esac
done
holdback_ensure_packages $plot_packages

build=build/default
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target holdback_cli >/dev/null
exec "$build/holdback" simulate "$@"
