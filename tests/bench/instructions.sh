#!/usr/bin/env bash
# Instructions the gateway runs per call, counted by callgrind: a figure that does not
# move with the machine's load, so two builds (a bisect's steps, say) compare on a
# shared VM where calls/s and CPU time do not hold still.
#
#   usage: tests/bench/instructions.sh [BIN ...]        (default: target/release/weir)
#          WARM=50 CALLS=300 PORT=4310 UPSTREAM=http://127.0.0.1:18080/v1
#   needs: valgrind, and an OpenAI-compatible upstream answering at once on $UPSTREAM
#          (../shared/bench/upstream/start.sh 18080 0).
#
# Each binary serves the production profile (a caller key, the ledger at its default
# sync level, metrics) with `max_in_flight = 8`, so valgrind can map the instance pool.
# After WARM calls the counters are zeroed; CALLS calls are then sent one at a time over
# fresh connections, and every instruction the process ran meanwhile (all threads:
# the ledger's and the timers' included) is divided by CALLS. Start-up under valgrind
# takes minutes (the components are compiled under it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WARM=${WARM:-50} CALLS=${CALLS:-300} PORT=${PORT:-4310}
UPSTREAM=${UPSTREAM:-http://127.0.0.1:18080/v1}
# shellcheck source=tests/bench/bench-gateway.sh
. "$ROOT/tests/bench/bench-gateway.sh"
BODY='{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
WORK=$(mktemp -d /tmp/weir-instructions.XXXXXX)
trap '[ -f "$WORK/pid" ] && kill "$(cat "$WORK/pid")" 2>/dev/null; sleep 1; rm -rf "$WORK"' EXIT
[ $# -gt 0 ] || set -- "$ROOT/target/release/weir"

{
  bench_gateway_toml "$PORT" "$UPSTREAM"
  printf '\n[server]\nmax_in_flight = 8\n\n[ledger]\npath = "%s/ledger.db"\n' "$WORK"
} > "$WORK/weir.toml"

call() {
  curl -fsS -o /dev/null -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d "$BODY" "http://127.0.0.1:$PORT/v1/chat/completions"
}

for bin in "$@"; do
  rm -f "$WORK"/ledger.db* "$WORK"/callgrind.out.*
  BENCH_KEY=sk-bench valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.%p" \
    "$bin" serve --config "$WORK/weir.toml" > "$WORK/gateway.log" 2>&1 &
  echo $! > "$WORK/pid"
  for _ in $(seq 900); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null && break
    sleep 1
  done
  for _ in $(seq "$WARM"); do call; done
  callgrind_control -z "$(cat "$WORK/pid")" > /dev/null
  for _ in $(seq "$CALLS"); do call; done
  callgrind_control -d "$(cat "$WORK/pid")" > /dev/null
  kill "$(cat "$WORK/pid")"
  wait "$(cat "$WORK/pid")" 2>/dev/null || true
  rm -f "$WORK/pid"
  total=$(grep -h '^summary:' "$WORK"/callgrind.out.*.1 | awk '{print $2}')
  echo "$("$bin" --version | head -1): $((total / CALLS)) instructions per call ($CALLS calls, load $(cut -d' ' -f1 /proc/loadavg))"
done
