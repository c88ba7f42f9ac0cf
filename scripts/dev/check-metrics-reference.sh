#!/usr/bin/env bash
# Checks that docs/reference/metrics.md lists every Prometheus metric family the sources emit
# (ctest's Docs.MetricsReference): the library's flow_control_* names (rendered with the prefix
# holdback_) and the gateway's holdback_gateway_* names, as quoted in include/ and examples/.
#   scripts/dev/check-metrics-reference.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
page=docs/reference/metrics.md
missing=0
names=$(grep -rhoE '"(holdback_gateway|flow_control)_[a-z_]+"' include examples --include='*.hpp' \
          --include='*.cpp' | tr -d '"' | sed -E 's/^flow_control_/holdback_flow_control_/' |
        sort -u)
[[ -n $names ]] || { echo "FAIL: no metric names found under include/ and examples/"; exit 1; }
for name in $names; do
  if ! grep -qF "| \`$name\` |" "$page"; then
    echo "$page: no row for $name"
    missing=1
  fi
done
if [[ $missing -ne 0 ]]; then
  echo "FAIL: metric families missing from $page (above)"
  exit 1
fi
echo "metrics reference: $(wc -w <<<"$names") families, all listed"
