#!/usr/bin/env bash
# Two configurations of one gateway binary compared in one run, with `ab-bench`
# (tests/src/bin/ab-bench.rs): BASE (side "off" by default) against CHANGE ("on").
#
#   usage: [BASE=P] [CHANGE=P] tests/bench/profile-ab.sh [PAIRS] [MODE] [CALLERS] [ROUNDS] [SECS]
#          defaults: BASE=off CHANGE=on, 6 interleave 1 10 3   (MODE: interleave, for one
#                    caller's p50, or rounds, for calls/s at CALLERS)
#   profiles: on     the production profile: a caller key, the ledger at its default sync
#                    level, metrics (the record's cost: on against off)
#             off    a caller key, the ledger and metrics off
#             local  "on" with the model's rpm / tpm buckets admitted in this process
#             fleet  "local" with [fleet] on: the same buckets shared through a Redis this
#                    script starts (redis-server on $REDIS_PORT, default 16390)
#   needs: an OpenAI-compatible upstream answering at once on $UPSTREAM (default
#          http://127.0.0.1:18080/v1: ../shared/bench/upstream/start.sh 18080 0), and
#          `cargo build --release -p weir-host --bin weir -p weir-tests --bin ab-bench`.
#
# Each pair starts two fresh gateways and swaps which port holds which side: a process
# measured against another of the same config differed by up to ~16 us p50 at one
# caller on this VM, whichever was the change, so only a pair's swapped twin cancels that.
set -euo pipefail
PAIRS=${1:-6} MODE=${2:-interleave} CALLERS=${3:-1} ROUNDS=${4:-10} SECS=${5:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEIR=${WEIR:-$ROOT/target/release/weir}
AB=${AB:-$ROOT/target/release/ab-bench}
UPSTREAM=${UPSTREAM:-http://127.0.0.1:18080/v1}
BASE=${BASE:-off} CHANGE=${CHANGE:-on}
REDIS_PORT=${REDIS_PORT:-16390}
WORK=$(mktemp -d /tmp/weir-profile-ab.XXXXXX)
# shellcheck source=tests/bench/bench-gateway.sh
. "$ROOT/tests/bench/bench-gateway.sh"
stop() { for side in a b; do [ -f "$WORK/$side/pid" ] && kill "$(cat "$WORK/$side/pid")" 2>/dev/null; done; true; }
stop_redis() { [ -f "$WORK/redis.pid" ] && kill "$(cat "$WORK/redis.pid")" 2>/dev/null; true; }
trap 'stop; stop_redis; sleep 1; rm -rf "$WORK"' EXIT
for profile in "$BASE" "$CHANGE"; do
  case $profile in
    on | off | local) ;;
    fleet)
      [ -f "$WORK/redis.pid" ] || redis-server --port "$REDIS_PORT" --save '' --appendonly no \
        --daemonize yes --pidfile "$WORK/redis.pid" --logfile "$WORK/redis.log"
      ;;
    *) echo "unknown profile $profile (on, off, local, fleet)" >&2; exit 2 ;;
  esac
done

# config SIDE PORT PROFILE: the bench model, a caller key, and what PROFILE adds.
config() {
  local dir=$WORK/$1
  mkdir -p "$dir"
  bench_gateway_toml "$2" "$UPSTREAM" > "$dir/weir.toml"
  # Buckets far above what this machine can send, so both sides admit every call and
  # only where the buckets are kept differs.
  case $3 in
    local | fleet) printf 'rpm = 100000000\ntpm = 9000000000\n' >> "$dir/weir.toml" ;;
  esac
  case $3 in
    on | local | fleet) printf '\n[ledger]\npath = "%s/ledger.db"\n' "$dir" >> "$dir/weir.toml" ;;
    off) printf '\n[ledger]\nenabled = false\n\n[metrics]\nenabled = false\n' >> "$dir/weir.toml" ;;
  esac
  if [ "$3" = fleet ]; then
    # Each pair starts with empty buckets: a fresh prefix per gateway start.
    printf '\n[fleet]\nredis_url = "redis://127.0.0.1:%s"\nkey_prefix = "ab%s"\n' "$REDIS_PORT" "$RANDOM" >> "$dir/weir.toml"
  fi
}

# start SIDE PORT PROFILE: a fresh gateway; its pid in SIDE/pid.
start() {
  rm -rf "${WORK:?}/$1"
  config "$1" "$2" "$3"
  BENCH_KEY=sk-bench "$WEIR" serve --config "$WORK/$1/weir.toml" > "$WORK/$1/gateway.log" 2>&1 &
  echo $! > "$WORK/$1/pid"
  for _ in $(seq 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$2/health" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "the $3 gateway did not start; see $WORK/$1/gateway.log" >&2
  exit 1
}

body='{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
for pair in $(seq "$PAIRS"); do
  stop
  sleep 1
  if [ $((pair % 2)) = 1 ]; then on=B; start a 4101 "$BASE"; start b 4102 "$CHANGE"
  else on=A; start a 4101 "$CHANGE"; start b 4102 "$BASE"; fi
  echo "## pair $pair: $CHANGE is side $on, $BASE the other"
  "$AB" --a http://127.0.0.1:4101/v1/chat/completions --b http://127.0.0.1:4102/v1/chat/completions \
    --a-pid "$(cat "$WORK/a/pid")" --b-pid "$(cat "$WORK/b/pid")" -H "authorization: Bearer $TOKEN" \
    --body "$body" --mode "$MODE" --callers "$CALLERS" --rounds "$ROUNDS" --round-secs "$SECS" | tail -4 \
    | tee "$WORK/pair-$pair-$on"
done

# Each pair's medians turned to CHANGE against BASE, then their median over the pairs.
echo "## $CHANGE against $BASE, per pair (calls/s, CPU per call, p50)"
for file in "$WORK"/pair-*; do
  on=${file##*-}
  awk -v on="$on" '
    /^B\/A calls\/s/ { calls = $4 + 0 }
    /^B\/A CPU per call/ { cpu = $6 + 0 }
    /^B-A p50/ { p50 = $6 + 0 }
    END {
      if (on == "A") { calls = calls ? 1 / calls : 0; cpu = cpu ? 1 / cpu : 0; p50 = -p50 }
      printf "%.3f %.3f %.0f\n", calls, cpu, p50
    }' "$file"
done | tee "$WORK/pairs" | sed 's/^/  /'
sort -n -k1 "$WORK/pairs" | awk -v change="$CHANGE" -v base="$BASE" '{ a[NR] = $1 } END { printf "median %s/%s calls/s %.3fx\n", change, base, (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
sort -n -k2 "$WORK/pairs" | awk -v change="$CHANGE" -v base="$BASE" '{ a[NR] = $2 } END { printf "median %s/%s CPU per call %.3fx\n", change, base, (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
sort -n -k3 "$WORK/pairs" | awk -v change="$CHANGE" -v base="$BASE" '{ a[NR] = $3 } END { printf "median %s-%s p50 %+.0f us\n", change, base, (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
