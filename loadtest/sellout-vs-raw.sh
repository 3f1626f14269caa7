#!/usr/bin/env bash
# Orders committed per second on one hot drop, end to end over HTTP with GATE=redis on MariaDB,
# against the raw single-order ceiling of the same database measured in the same run
# (loadtest/raw-hot-row.sh: BEGIN; conditional UPDATE; INSERT; COMMIT from mariadb-slap, no
# application). The sell-out (crates/goods-bench/src/bin/http_sellout.rs) fails on its own
# checks (client 202s = database sold = stats successCount = LIMITED, only 202 and SOLD_OUT);
# this script also fails when the ratio is below MIN_RATIO (default 1.0).
#
#   loadtest/sellout-vs-raw.sh               # LIMITED=20000 CONNECTIONS=64 RAW_CONCURRENCY=16
#   EVENTS=0 SERVER_BIN=old/goods-server ... # a build without the event log: no events checked
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), mariadb-slap,
# MariaDB and Redis on loopback. Loopback only; it stops by itself when the drop sells out.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
RAW_CONCURRENCY="${RAW_CONCURRENCY:-16}"
MIN_RATIO="${MIN_RATIO:-1.0}"
RAW="${RAW:-loadtest/raw-hot-row.sh}"
# The binaries measured (another build's, to compare two versions in one run).
SERVER_BIN="${SERVER_BIN:-target/release/goods-server}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18081}"
. loadtest/lib/release-server.sh

echo "== raw ceiling: $RAW $RAW_CONCURRENCY"
raw=$("$RAW" "$RAW_CONCURRENCY" | awk '/raw_orders_per_s/ {print $2}')
[ -n "$raw" ] || { echo "FAIL: no raw ceiling from $RAW"; exit 1; }
echo "raw_orders_per_s $raw"

start_release_server sellout "$PORT" RECONCILE_INTERVAL_MS=0

echo "== sell-out: $LIMITED units, $CONNECTIONS buyers at a time, GATE=redis"
status=0
out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" "$SELLOUT_BIN") || status=$?
echo "$out"
[ "$status" = 0 ] || { echo "FAIL: the sell-out's checks failed"; exit 1; }
rate=$(echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*/\1/p')
# EVENTS=1 (a build with the event log): the log holds every event of the sale, each once
# (LIMITED orders placed, the drop's creation and its sell-out), moved out of the batch rows
# by the first read of /admin/events, which is timed.
if [ "${EVENTS:-1}" = 1 ]; then
  t0=$(date +%s.%N)
  curl -sf -H 'X-User-Id: 1' -H 'X-User-Role: admin' "$BASE/admin/events?limit=1" >/dev/null ||
    { echo "FAIL: /admin/events did not answer"; exit 1; }
  t1=$(date +%s.%N)
  counts=$(release_sql "SELECT (SELECT COUNT(*) FROM $DB.events), (SELECT COUNT(DISTINCT event_id) FROM $DB.events), (SELECT COUNT(*) FROM $DB.event_batches)" | tail -1 | tr '\t' ' ')
  want="$((LIMITED + 2)) $((LIMITED + 2)) 0"
  echo "events_moved_by_first_read_s $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') events/distinct/waiting: $counts"
  [ "$counts" = "$want" ] || { echo "FAIL: events, distinct ids, batch rows waiting: $counts, want $want"; exit 1; }
fi
ratio=$(awk -v a="$rate" -v b="$raw" 'BEGIN {printf "%.2f", a / b}')
echo "== end to end $rate orders/s, raw ceiling $raw orders/s: ratio $ratio (goal >= $MIN_RATIO)"
awk -v r="$ratio" -v min="$MIN_RATIO" 'BEGIN {exit (r >= min) ? 0 : 1}' || { echo "FAIL: ratio $ratio below $MIN_RATIO"; exit 1; }
