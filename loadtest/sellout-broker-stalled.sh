#!/usr/bin/env bash
# A sell-out with the event broker stalled (SIGSTOP) against one with no broker at all,
# alternately, ROUNDS each: docs/events.md promises that a broker that is down or stalled never
# slows a purchase (events wait in the database). Each sell-out fails on its own checks
# (crates/goods-bench/src/bin/http_sellout.rs: client 202s = sold = successCount = LIMITED);
# this script also fails when the stalled median falls below MIN_RATIO x the broker-less median,
# and unless every event reaches the stream once the broker resumes (SIGCONT).
#
#   loadtest/sellout-broker-stalled.sh      # LIMITED=20000 CONNECTIONS=64 ROUNDS=3 MIN_RATIO=0.9
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), nats-server,
# MariaDB and Redis on loopback. Loopback only; it stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
MIN_RATIO="${MIN_RATIO:-0.9}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18082}"
. loadtest/lib/release-server.sh

NATS_DIR="$(mktemp -d)"
. scripts/lib/ports.sh  # free_port, free_ports N
NATS_PORT=$(free_port); MONITOR_PORT=$(free_port)
NATS=""
# A fresh broker per round: each round's database numbers its drop 1 again, so its event ids
# repeat the last round's, which one stream would drop as duplicates.
start_nats() {
  stop_nats
  rm -rf "$NATS_DIR/store"
  nats-server -a 127.0.0.1 -p "$NATS_PORT" -m "$MONITOR_PORT" -js -sd "$NATS_DIR/store" >"$NATS_DIR/log" 2>&1 &
  NATS=$!
  sleep 0.5
}
stop_nats() { [ -n "$NATS" ] && { kill -CONT "$NATS" 2>/dev/null; kill "$NATS" 2>/dev/null; wait "$NATS" 2>/dev/null; } || true; NATS=""; }
cleanup() { stop_nats; stop_release_server; rm -rf "$NATS_DIR"; }
trap cleanup EXIT

sellout() { # VARIANT: prints orders_per_s and accepted_p95_ms
  local out status=0
  out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" "$SELLOUT_BIN") || status=$?
  [ "$status" = 0 ] || { echo "$out" >&2; echo "FAIL: the sell-out's checks failed ($1)" >&2; exit 1; }
  echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*accepted_p95_ms=\([0-9.]*\).*/\1 \2/p'
}

declare -a none stalled
for round in $(seq 1 "$ROUNDS"); do
  start_release_server nobroker "$PORT" RECONCILE_INTERVAL_MS=0
  read -r rate p95 < <(sellout "no broker")
  none+=("$rate")
  echo "round $round, no broker: $rate orders/s, accepted p95 $p95 ms"
  stop_release_server; trap cleanup EXIT

  stream="STALLED_$round"
  start_nats
  start_release_server stalled "$PORT" RECONCILE_INTERVAL_MS=0 EVENTS_URL="nats://127.0.0.1:$NATS_PORT" EVENTS_STREAM="$stream"
  # drop.created reaches the stream, then the broker stops answering.
  sleep 1
  kill -STOP "$NATS"
  read -r rate p95 < <(sellout "broker stalled")
  stalled+=("$rate")
  echo "round $round, broker stalled: $rate orders/s, accepted p95 $p95 ms"
  kill -CONT "$NATS"
  # Every event (drop.created, LIMITED order.placed, drop.sold_out) reaches the stream.
  want=$((LIMITED + 2))
  for _ in $(seq 1 600); do
    got=$(curl -s "http://127.0.0.1:$MONITOR_PORT/jsz?accounts=true&streams=true" 2>/dev/null |
      python3 -c "import json,sys; d=json.load(sys.stdin); print(sum(s['state']['messages'] for a in d.get('account_details',[]) for s in a.get('stream_detail',[]) if s['name']=='$stream'))" 2>/dev/null || echo 0)
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  [ "$got" = "$want" ] || { echo "FAIL: the stream holds $got events of $want after SIGCONT"; exit 1; }
  echo "round $round: all $want events reached the stream after SIGCONT"
  stop_release_server; trap cleanup EXIT
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m_none=$(median "${none[@]}"); m_stalled=$(median "${stalled[@]}")
ratio=$(awk -v a="$m_stalled" -v b="$m_none" 'BEGIN {printf "%.2f", a / b}')
echo "== median: no broker $m_none orders/s, broker stalled $m_stalled orders/s: ratio $ratio (goal >= $MIN_RATIO)"
awk -v r="$ratio" -v m="$MIN_RATIO" 'BEGIN {exit !(r >= m)}' || { echo "FAIL: the stalled broker slowed the sell-out"; exit 1; }
