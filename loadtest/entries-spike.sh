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
MYSQL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"
DB="entries_$(date +%s)_$$"
PORT="${PORT:-18082}"
BASE="http://127.0.0.1:$PORT"

hostport="${MYSQL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "CREATE DATABASE $DB"
SERVER=""
trap '[ -n "$SERVER" ] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; };
      mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "DROP DATABASE IF EXISTS $DB"' EXIT

AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$PORT" DATABASE_URL="$MYSQL/$DB" DATABASE_MIGRATE=true \
  GATE=redis REDIS_URL="$REDIS" REDIS_KEY_PREFIX="entries:$DB:" RUST_LOG=warn \
  OPS_BIND_ADDR=127.0.0.1:0 "$SERVER_BIN" &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/health/ready" >/dev/null && break; sleep 0.1; done
curl -sf "$BASE/health/ready" >/dev/null || { echo "FAIL: the server did not start"; exit 1; }

echo "== entries: $RATE new buyers/s for ${SECONDS_RUN}s, open loop, at most $IN_FLIGHT in flight"
status=0
out=$(BASE="$BASE" RATE="$RATE" SECONDS="$SECONDS_RUN" IN_FLIGHT="$IN_FLIGHT" "$ENTRIES_BIN") || status=$?
echo "$out"
[ "$status" = 0 ] || { echo "FAIL: the entries' checks failed"; exit 1; }
reached=$(echo "$out" | sed -n 's/.*entries_per_s=\([0-9]*\).*/\1/p')
echo "== $reached entries/s reached (goal >= $MIN_RATE)"
[ "$reached" -ge "$MIN_RATE" ] || { echo "FAIL: $reached entries/s, below $MIN_RATE"; exit 1; }
