#!/usr/bin/env bash
# The design document's headline: 20,000 purchase attempts per second on one drop of 3,000
# units, open loop, every request a new buyer (crates/goods-bench/src/bin/http_spike.rs), against
# a release server it starts on MariaDB + Redis (production mode, defaults). Fails unless the
# drop sells out exactly (stats' soldQuantity = successCount = the client's 202s = LIMITED), every
# other answer is 409 SOLD_OUT, and the rate reached is at least MIN_RATE (default 95% of RATE).
# Reports late starts, admitted and refused latency separately from each request's scheduled
# start (corrected for coordinated omission), and the server's CPU per 1,000 requests.
#
#   loadtest/spike.sh                        # RATE=20000 SECONDS_RUN=10 LIMITED=3000
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), MariaDB and Redis
# on loopback. Loopback only; it stops by itself after SECONDS_RUN.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE="${RATE:-20000}"
SECONDS_RUN="${SECONDS_RUN:-10}"
LIMITED="${LIMITED:-3000}"
CONNECTIONS="${CONNECTIONS:-256}"
MIN_RATE="${MIN_RATE:-$((RATE * 95 / 100))}"
SERVER_BIN="${SERVER_BIN:-target/release/goods-server}"
SPIKE_BIN="${SPIKE_BIN:-target/release/http_spike}"
PORT="${PORT:-18083}"
. loadtest/lib/release-server.sh
start_release_server spike "$PORT"

echo "== spike: $RATE purchase attempts/s for ${SECONDS_RUN}s on $LIMITED units, open loop, new buyer each"
status=0
out=$(BASE="$BASE" RATE="$RATE" SECONDS="$SECONDS_RUN" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" \
  SERVER_PID="$SERVER" "$SPIKE_BIN") || status=$?
echo "$out"
[ "$status" = 0 ] || { echo "FAIL: the spike's checks failed"; exit 1; }
reached=$(echo "$out" | sed -n 's/.*requests_per_s=\([0-9]*\).*/\1/p')
echo "== $reached requests/s reached (goal >= $MIN_RATE)"
[ "$reached" -ge "$MIN_RATE" ] || { echo "FAIL: $reached requests/s, below $MIN_RATE"; exit 1; }
