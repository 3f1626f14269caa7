#!/usr/bin/env bash
# A sell-out of a drop in 10 sizes against a sell-out of a drop without sizes, the same units,
# on one release server (GATE=redis, MariaDB), alternating (ROUNDS, default 3): issue 42 asks
# that a drop in sizes sell out within 10% of one without (the median of the per-round ratios
# of orders/s at least MIN_RATIO, default 0.90). Each sell-out fails on its own checks
# (crates/goods-bench/src/bin/http_sellout.rs: client 202s = sold = successCount = LIMITED, only
# 202 and SOLD_OUT; in sizes, each size sold exactly its units and the client's 202s per size
# equal them).
#
#   loadtest/sellout-sizes.sh               # LIMITED=20000 CONNECTIONS=64 ROUNDS=3
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), MariaDB and Redis
# on loopback. Loopback only; it stops by itself when the drops sell out.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
MIN_RATIO="${MIN_RATIO:-0.90}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18082}"
. loadtest/lib/release-server.sh
start_release_server sellout_sizes "$PORT" RECONCILE_INTERVAL_MS=0

sellout() {
  local out
  out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" SIZES="$1" "$SELLOUT_BIN") ||
    { echo "$out"; echo "FAIL: the sell-out's checks failed (SIZES=$1)"; exit 1; }
  echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
plain_all=(); sized_all=(); ratios=()
for round in $(seq 1 "$ROUNDS"); do
  plain=$(sellout 0)
  sized=$(sellout 10)
  plain_all+=("$plain"); sized_all+=("$sized")
  ratios+=("$(awk -v a="$sized" -v b="$plain" 'BEGIN {printf "%.3f", a/b}')")
  echo "  round $round: without sizes $plain orders/s, in 10 sizes $sized orders/s, ratio ${ratios[-1]}"
done
ratio=$(printf '%s\n' "${ratios[@]}" | median)
echo "== summary (medians of $ROUNDS rounds of $LIMITED units, $CONNECTIONS buyers at a time)"
echo "  without sizes   $(printf '%s\n' "${plain_all[@]}" | median) orders/s"
echo "  in 10 sizes     $(printf '%s\n' "${sized_all[@]}" | median) orders/s"
echo "  ratio           $ratio (rounds $(printf '%s ' "${ratios[@]}"))"
awk -v r="$ratio" -v min="$MIN_RATIO" 'BEGIN {exit (r >= min) ? 0 : 1}' ||
  { echo "FAIL: a drop in sizes sold out at $ratio of one without, below $MIN_RATIO"; exit 1; }
