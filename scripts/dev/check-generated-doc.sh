#!/usr/bin/env bash
# Fails when a generated page differs from what its generator prints now (ctest's
# Docs.CliReference and Docs.ConfigReference).
#   scripts/dev/check-generated-doc.sh PAGE GENERATOR ARGS...
set -euo pipefail
page=$1
shift
fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
"$@" >"$fresh"
if ! diff -u "$page" "$fresh"; then
  echo "FAIL: $page is stale; regenerate it with: $* > $page"
  exit 1
fi
echo "$page: current"
