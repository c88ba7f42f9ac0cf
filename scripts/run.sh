#!/usr/bin/env bash
# Builds holdback and runs its main job on a built-in default:
#   holdback ceilings   (the proposal's sigmoid-smoothed policy over priorities 100,50,0,-1)
# Extra arguments are passed to `holdback ceilings`, e.g. scripts/run.sh --saturation 0.7
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
holdback_ensure_packages

build=build/default
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target holdback_cli >/dev/null
exec "$build/holdback" ceilings "${@:---saturation=0.7}"
