#!/usr/bin/env bash
# Draw entries at the opening's spike: new buyers enter one DRAW drop at RATE per second for
# SECONDS, open loop (crates/goods-bench/src/bin/http_entries.rs), against a release server on
# MariaDB (production mode: GATE=redis, which draws do not use, and the database's batched
# entry inserts). Fails unless every new buyer was answered 202 and the drop's entryCount equals
# the client's count of 202s (none lost, none twice), or when the entries/s reached fall below
# MIN_RATE (default 95% of RATE).
#
#   loadtest/entries-spike.sh                # RATE=10000 SECONDS=10
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), MariaDB and Redis
# on loopback. Loopback only; it stops by itself after SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE="${RATE:-10000}"
SECONDS_RUN="${SECONDS_RUN:-10}"
IN_FLIGHT="${IN_FLIGHT:-512}"
MIN_RATE="${MIN_RATE:-$((RATE * 95 / 100))}"
SERVER_BIN="${SERVER_BIN:-target/release/goods-server}"
ENTRIES_BIN="${ENTRIES_BIN:-target/release/http_entries}"
PORT="${PORT:-18082}"
. loadtest/lib/release-server.sh
start_release_server entries "$PORT"

echo "== entries: $RATE new buyers/s for ${SECONDS_RUN}s, open loop, at most $IN_FLIGHT in flight"
status=0
out=$(BASE="$BASE" RATE="$RATE" SECONDS="$SECONDS_RUN" IN_FLIGHT="$IN_FLIGHT" "$ENTRIES_BIN") || status=$?
echo "$out"
[ "$status" = 0 ] || { echo "FAIL: the entries' checks failed"; exit 1; }
reached=$(echo "$out" | sed -n 's/.*entries_per_s=\([0-9]*\).*/\1/p')
echo "== $reached entries/s reached (goal >= $MIN_RATE)"
[ "$reached" -ge "$MIN_RATE" ] || { echo "FAIL: $reached entries/s, below $MIN_RATE"; exit 1; }
