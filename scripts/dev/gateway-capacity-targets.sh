#!/usr/bin/env bash
# How far a gateway configuration is from the gateway's targets (docs/performance/gateway.md,
# "Capacity targets of the default configuration"): runs the capacity e2e tests (tests/e2e/gateway_capacity_e2e_test.cpp: two
# holdback-model-servers, a batch flood, an interactive request every 40 ms, against a
# static-threshold-1.0 control) RUNS times per configuration and prints each run's figures.
#
#   scripts/dev/gateway-capacity-targets.sh [BUILD_DIR] [RUNS] [CONFIG ...]
#     BUILD_DIR  default build/default (targets holdback_e2e_tests, holdback_gateway,
#                holdback_model_server must be built)
#     RUNS       default 3
#     CONFIG     gateway config files to try; "default" (the default) is the built-in config
# Environment: POOLS (default "SlotBound KvBound"), GATEWAY_ARGS (extra gateway flags, e.g.
# "--endpoint-slots 4"), REQUESTS (interactive requests per run, default 120).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build/default}"
RUNS="${2:-3}"
shift 2 2>/dev/null || shift $#
CONFIGS=("${@:-default}")
TESTS="$BUILD/tests/e2e/holdback_e2e_tests"
[ -x "$TESTS" ] || { echo "$TESTS not built"; exit 1; }
for config in "${CONFIGS[@]}"; do
  for pool in ${POOLS:-SlotBound KvBound}; do
    for run in $(seq "$RUNS"); do
      echo "== config $config, pool $pool, run $run"
      file=""
      [ "$config" != default ] && file="$(realpath "$config")"
      HOLDBACK_CAPACITY_E2E_CONFIG="$file" HOLDBACK_CAPACITY_E2E_ARGS="${GATEWAY_ARGS:-}" \
        HOLDBACK_CAPACITY_E2E_REQUESTS="${REQUESTS:-120}" \
        "$TESTS" --gtest_filter="GatewayCapacityE2ETest.${pool}*" 2>&1 |
        grep -E '^\[e2e-capacity\]|^  (default|control|ratios):|^\[  (PASSED|FAILED)  \] [0-9]'
    done
  done
done
