#!/usr/bin/env bash
# Writes docs/reference/cli.md (on stdout) from every program's --help: the `holdback` tool and
# its commands, holdback-gateway, holdback-model-server and holdback-replay.
#   scripts/dev/reference-cli.sh BUILD_DIR > docs/reference/cli.md
# ctest's Docs.CliReference runs it and fails when the checked-in page differs.
set -euo pipefail
build=${1:?usage: reference-cli.sh BUILD_DIR}
holdback=$build/holdback
gateway=$build/examples/gateway/holdback-gateway
server=$build/examples/model-server/holdback-model-server
replay=$build/examples/replay/holdback-replay

# Under a sanitizer build (the CI's ASan stage runs this too) a leak report would be appended to
# the text; the help text is what is checked here, not leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# The section of one program: its heading and its --help output verbatim (stdout and stderr).
section() {
  local heading=$1
  shift
  printf '\n## `%s`\n\n```text\n' "$heading"
  "$@" --help 2>&1
  printf '```\n'
}

cat <<'HEAD'
# Command-line reference

Every program's `--help`, verbatim. This page is generated: `scripts/dev/reference-cli.sh
BUILD_DIR > docs/reference/cli.md` rewrites it, and `ctest -R Docs.CliReference` fails when it
differs from what the programs print. Guides: [simulation](../simulation.md) (`holdback
simulate`), [configuration](../guide/configuration.md) (`holdback validate`),
[gateway](../guide/gateway.md), [model server](../guide/model-server.md),
[replay](../guide/replay.md).

Exit codes of `holdback`: 0 success, 1 invalid input, 2 usage error.
HEAD
section holdback "$holdback"
for command in simulate validate ceilings saturation eviction-bench; do
  section "holdback $command" "$holdback" "$command"
done
section holdback-gateway "$gateway"
section holdback-model-server "$server"
section holdback-replay "$replay"
