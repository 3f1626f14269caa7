#!/usr/bin/env bash
# What anonymous traffic costs the database: GET /limited-drops/{id} of random ids, as fast as
# wrk sends them, against the production mode (MariaDB + Redis), compared with the same server
# idle. The statements come from the server's own db_statements_total (its ops listener).
#
# Fails unless every answer is 404 DROP_NOT_FOUND (wrk counts non-2xx; none may be 2xx) and the
# statements per second during the flood exceed the idle rate by at most MAX_EXTRA (default 10:
# one shared scan of new drop ids per 200 ms, two statements each), whatever rate wrk reached.
# RATE_LIMIT_PER_IP is off: wrk's one address would be refused 429 after its burst, and this
# measures what an unknown id costs, not the bucket.
#
#   loadtest/random-ids.sh                     # 10 s of random ids, 128 connections
#
# Needs wrk, a release build (cargo build --release -p goods-server), MariaDB and Redis on
# loopback. Loopback only; it stops by itself after IDLE + DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10}"
IDLE="${IDLE:-5}"
CONNECTIONS="${CONNECTIONS:-128}"
THREADS="${THREADS:-2}"
MAX_EXTRA="${MAX_EXTRA:-10}"
MYSQL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"
DB="randomids_$(date +%s)_$$"
PORT="${PORT:-18080}"; OPS_PORT="${OPS_PORT:-19464}"
BASE="http://127.0.0.1:$PORT"; OPS="http://127.0.0.1:$OPS_PORT"
SELLER=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')

hostport="${MYSQL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "CREATE DATABASE $DB"
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true;
      mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "DROP DATABASE IF EXISTS $DB"' EXIT

AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$PORT" OPS_BIND_ADDR="127.0.0.1:$OPS_PORT" \
  DATABASE_URL="$MYSQL/$DB" DATABASE_MIGRATE=true REDIS_URL="$REDIS" REDIS_KEY_PREFIX="randomids:$DB:" \
  RATE_LIMIT_PER_IP=off RUST_LOG=warn "${SERVER_BIN:-target/release/goods-server}" &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$OPS/health/ready" >/dev/null && break; sleep 0.1; done
# Measure this server, not another one left on the same ports.
kill -0 "$SERVER" 2>/dev/null || { echo "FAIL: the server did not start (ports $PORT/$OPS_PORT in use?)"; exit 1; }

product=$(curl -sf -X POST "$BASE/products" "${SELLER[@]}" -d '{"name":"load","stockQuantity":10}' | sed 's/.*"productId":\([0-9]*\).*/\1/')
open=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ); close=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
curl -sf -X POST "$BASE/limited-drops" "${SELLER[@]}" \
  -d "{\"productId\":$product,\"openAt\":\"$open\",\"closeAt\":\"$close\",\"limitedQuantity\":5}" >/dev/null

statements() { curl -sf "$OPS/metrics" | awk '/^db_statements_total / {print $2}'; }
now() { date +%s.%N; }
t0=$(now); s0=$(statements)
sleep "$IDLE"
t1=$(now); s1=$(statements)
out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" -s loadtest/wrk/random-ids.lua "$BASE")
t2=$(now); s2=$(statements)
requests=$(echo "$out" | awk '/requests in/ {print $1}')
non2xx=$(echo "$out" | awk '/Non-2xx or 3xx responses/ {print $5}')
rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
idle_rate=$(awk -v s="$((s1 - s0))" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", s/(b-a)}')
flood_rate=$(awk -v s="$((s2 - s1))" -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", s/(b-a)}')
echo "$out" | sed 's/^/  /'
echo "== random drop ids: $requests requests at $rate/s; database statements: idle $idle_rate/s, during the flood $flood_rate/s"
fail=0
[ "${non2xx:-0}" = "$requests" ] || { echo "FAIL: $requests answers, only ${non2xx:-0} non-2xx"; fail=1; }
sample=$(curl -s "$BASE/limited-drops/123456789012345")
echo "$sample" | grep -q '"code":"DROP_NOT_FOUND"' || { echo "FAIL: a random id answered $sample"; fail=1; }
awk -v f="$flood_rate" -v i="$idle_rate" -v m="$MAX_EXTRA" 'BEGIN {exit !(f <= i + m)}' ||
  { echo "FAIL: $flood_rate statements/s during the flood, more than idle ($idle_rate) + $MAX_EXTRA"; fail=1; }
[ "$fail" = 0 ] && echo "== random-ids: passed"
exit "$fail"
