#!/usr/bin/env bash
# Runs clang-tidy 14 with the root .clang-tidy over every translation unit of the tree (src,
# tests, bench, examples, fuzz: whatever build/tidy/compile_commands.json lists) and fails on any
# warning (WarningsAsErrors: '*').
#
#   scripts/dev/tidy.sh                 the checks of .clang-tidy, two files at a time
#   scripts/dev/tidy.sh --analyzer      also the clang static analyzer (much slower)
#   scripts/dev/tidy.sh REGEX           only the files whose path matches REGEX (e.g. 'include/holdback/config/')
#   HOLDBACK_TIDY_JOBS=N            files at a time (default 2)
#
# Only configures build/tidy (compile_commands.json and the generated version header); nothing
# is compiled.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/deps.sh
holdback_ensure_packages clang-tidy-14

extra_checks=""
if [ "${1:-}" = "--analyzer" ]; then
  # optin.performance.Padding only reports struct layouts, chosen for readability here.
  extra_checks="-checks=clang-analyzer-*,-clang-analyzer-optin.performance.Padding"
  shift
fi
files=${1:-.*}

cmake -S . -B build/tidy -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DHOLDBACK_BUILD_TESTS=ON \
  -DHOLDBACK_BUILD_TOOLS=ON -DHOLDBACK_BUILD_BENCH=ON -DHOLDBACK_BUILD_EXAMPLES=ON >/dev/null
echo "== clang-tidy: $(grep -c '"file"' build/tidy/compile_commands.json) translation units" >&2
# run-clang-tidy exits non-zero when any clang-tidy run reported an error (every warning is one).
run-clang-tidy-14 -p build/tidy -j"${HOLDBACK_TIDY_JOBS:-2}" -quiet \
  -clang-tidy-binary "$(command -v clang-tidy-14)" $extra_checks "$files" >build/tidy/tidy.log 2>&1 ||
  status=$?
if [ "${status:-0}" -ne 0 ]; then
  sed 's/\x1b\[[0-9;]*m//g' build/tidy/tidy.log | grep -E "(warning|error): " | sort -u >&2 || true
  echo "clang-tidy found problems (full log: build/tidy/tidy.log)" >&2
  exit 1
fi
echo "clang-tidy: no warnings" >&2
