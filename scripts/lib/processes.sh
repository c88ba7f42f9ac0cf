# Background processes for the gateway scripts and the shell e2e tests (sourced, bash):
#   WORK       a fresh directory, removed on exit with every process started by `start`
#   start VAR NAME CMD...
#              runs CMD in the background (stdout in $WORK/NAME.out, stderr in $WORK/NAME.err),
#              waits up to 10 s for its "listening on URL" line, sets VAR to URL and VAR_PID to
#              its pid; otherwise prints "FAIL: NAME did not start" with its stderr and exits 1.
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
start() {
  local var="$1" name="$2"
  shift 2
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  printf -v "${var}_PID" '%s' "$!"
  for _ in $(seq 100); do
    if grep -q '^listening on ' "$WORK/$name.out" 2>/dev/null; then
      printf -v "$var" '%s' "$(sed -n 's/^listening on //p' "$WORK/$name.out")"
      return 0
    fi
    sleep 0.1
  done
  echo "FAIL: $name did not start"
  cat "$WORK/$name.err"
  exit 1
}
