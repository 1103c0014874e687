#!/usr/bin/env bash
# The record's cost: the gateway with its ledger and metrics on (the production profile: a
# caller key, the ledger at its default sync level, metrics) against the same binary with
# both off, in one run, with `ab-bench` (tests/src/bin/ab-bench.rs).
#
#   usage: tests/bench/record-ab.sh [PAIRS] [MODE] [CALLERS] [ROUNDS] [SECS]
#          defaults: 6 interleave 1 10 3      (MODE: interleave, for one caller's p50,
#                                              or rounds, for calls/s at CALLERS)
#   needs: an OpenAI-compatible upstream answering at once on $UPSTREAM (default
#          http://127.0.0.1:18080/v1: ../shared/bench/upstream/start.sh 18080 0), and
#          `cargo build --release -p weir-host --bin weir -p weir-tests --bin ab-bench`.
#
# Each pair starts two fresh gateways and swaps which port holds the record's side: a
# process measured against another of the same config differed by up to ~16 us p50 at one
# caller on this VM, whichever was "on", so only a pair's swapped twin cancels that.
set -euo pipefail
PAIRS=${1:-6} MODE=${2:-interleave} CALLERS=${3:-1} ROUNDS=${4:-10} SECS=${5:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEIR=${WEIR:-$ROOT/target/release/weir}
AB=${AB:-$ROOT/target/release/ab-bench}
UPSTREAM=${UPSTREAM:-http://127.0.0.1:18080/v1}
WORK=$(mktemp -d /tmp/weir-record-ab.XXXXXX)
TOKEN=wk-bench-0000000000000000000000000000000000000000
stop() { for side in a b; do [ -f "$WORK/$side/pid" ] && kill "$(cat "$WORK/$side/pid")" 2>/dev/null; done; true; }
trap 'stop; sleep 1; rm -rf "$WORK"' EXIT

# config SIDE PORT PROFILE: the bench model, a caller key, and the record on or off.
config() {
  local dir=$WORK/$1
  mkdir -p "$dir"
  cat > "$dir/weir.toml" <<TOML
listen = "127.0.0.1:$2"

[[key]]
id = "bench"
member = "bench"
hash = "sha256:$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"

[[model]]
id = "bench-model"
provider = "openai"
endpoint = "$UPSTREAM"
credential = "BENCH_KEY"
max_output_tokens = 1000
context_window = 8000
output_tokens = 100
TOML
  case $3 in
    on) printf '\n[ledger]\npath = "%s/ledger.db"\n' "$dir" >> "$dir/weir.toml" ;;
    off) printf '\n[ledger]\nenabled = false\n\n[metrics]\nenabled = false\n' >> "$dir/weir.toml" ;;
  esac
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
  if [ $((pair % 2)) = 1 ]; then on=B; start a 4101 off; start b 4102 on
  else on=A; start a 4101 on; start b 4102 off; fi
  echo "## pair $pair: the record is on at side $on"
  "$AB" --a http://127.0.0.1:4101/v1/chat/completions --b http://127.0.0.1:4102/v1/chat/completions \
    --a-pid "$(cat "$WORK/a/pid")" --b-pid "$(cat "$WORK/b/pid")" -H "authorization: Bearer $TOKEN" \
    --body "$body" --mode "$MODE" --callers "$CALLERS" --rounds "$ROUNDS" --round-secs "$SECS" | tail -4 \
    | tee "$WORK/pair-$pair-$on"
done

# Each pair's medians turned to on against off, then their median over the pairs.
echo "## on against off, per pair (calls/s, CPU per call, p50)"
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
sort -n -k1 "$WORK/pairs" | awk '{ a[NR] = $1 } END { printf "median on/off calls/s %.3fx\n", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
sort -n -k2 "$WORK/pairs" | awk '{ a[NR] = $2 } END { printf "median on/off CPU per call %.3fx\n", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
sort -n -k3 "$WORK/pairs" | awk '{ a[NR] = $3 } END { printf "median on-off p50 %+.0f us\n", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
