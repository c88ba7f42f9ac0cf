#!/usr/bin/env bash
# Checks the library's lock annotations (include/holdback/core/thread_annotations.hpp) with
# Clang's thread-safety analysis: every translation unit of the library (src/*.cpp, one per
# layer) is compiled with clang++-14 -Wthread-safety -Werror, syntax only (about 30 s). Called
# early by scripts/test.sh; runnable on its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/deps.sh
holdback_ensure_packages clang-14

build=build/thread-safety
echo "== Clang thread-safety analysis: src/*.cpp" >&2
# Configure only: generates holdback/version.hpp.
CXX=clang++-14 cmake -S . -B $build -DHOLDBACK_BUILD_TESTS=OFF -DHOLDBACK_BUILD_TOOLS=OFF \
  -DHOLDBACK_BUILD_BENCH=OFF -DHOLDBACK_BUILD_EXAMPLES=OFF -DHOLDBACK_INSTALL=OFF >/dev/null
# One clang per translation unit, as many at once as there are cores.
failed=0
ls src/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
  'clang++-14 -std=c++20 -fsyntax-only -Iinclude -I'"$build"'/include -Wthread-safety \
     -Wthread-safety-beta -Werror "$1" || { echo "thread-safety: $1 failed" >&2; exit 1; }' _ {} ||
  failed=1
exit $failed
