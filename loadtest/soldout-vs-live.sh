#!/usr/bin/env bash
# How fast the service turns buyers away once a drop is sold out, against the cheapest route it
# has (GET /health/live), with the same load generator (wrk) against the same server in one run.
# Issue 4's goal was sold-out purchases at 0.80 of /health/live's throughput; on this machine it
# was met once as a median (0.80) and not since (medians 0.59-0.72, docs/benchmarks.md). The run fails below
# MIN_RATIO (default 0.50: the floor no build has gone under here, so a regression fails it and
# the default passes where the docs say it does), on any 2xx from the sold-out drop, on any
# answer other than 409, and when the server's SOLD_OUT count and wrk's count disagree.
#
# On a shared 2-core machine one wrk run varies by +-10% and more (other tenants come and go),
# so the two are measured in alternating rounds (ROUNDS, default 7, of DURATION each), each
# round's sold-out rate is divided by the live rate measured just before it, and the run is
# judged by the median of those per-round ratios (a slow spell hits both halves of a round).
#
#   loadtest/soldout-vs-live.sh                # GATE=redis on MariaDB (production mode)
#   GATE=off loadtest/soldout-vs-live.sh       # the database-only baseline
#
# Needs wrk, a release build (cargo build --release -p goods-server), MariaDB and Redis on
# loopback. Loopback only; every run stops by itself after 2 x DURATION. SERVER_BIN picks another
# build of the server (to compare two commits in one session).
set -euo pipefail
cd "$(dirname "$0")/.."

GATE="${GATE:-redis}"
# The buyer's token bucket stays on (each request is a new buyer, so none is refused: the run
# pays what the bucket costs); RATE_LIMIT_PER_BUYER=off measures without it. The per-address
# bucket is off: wrk's one address is exactly what it would refuse, and /health/live is the
# cheapest route by design.
RATE_LIMIT_PER_BUYER="${RATE_LIMIT_PER_BUYER:-20/s}"
DURATION="${DURATION:-5s}"
ROUNDS="${ROUNDS:-7}"
MIN_RATIO="${MIN_RATIO:-0.50}"
CONNECTIONS="${CONNECTIONS:-64}"
THREADS="${THREADS:-2}"
MYSQL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"
DB="loadtest_$(date +%s)"
PORT="${PORT:-18080}"
# The server and wrk on separate cores by default, so the generator does not take CPU from the
# server in proportion to the rate it reaches (which would flatter the slower route).
SERVER_CPUS="${SERVER_CPUS:-0}"
WRK_CPUS="${WRK_CPUS:-1}"
# One HTTP worker per core the server may use.
HTTP_WORKERS="${HTTP_WORKERS:-$(( $(echo "$SERVER_CPUS" | tr ',' '\n' | wc -l) ))}"
BASE="http://127.0.0.1:$PORT"
SELLER=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')

hostport="${MYSQL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "CREATE DATABASE $DB"
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true;
      mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "DROP DATABASE IF EXISTS $DB"' EXIT

AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$PORT" DATABASE_URL="$MYSQL/$DB" DATABASE_MIGRATE=true GATE="$GATE" REDIS_URL="$REDIS" \
  RATE_LIMIT_PER_IP=off RATE_LIMIT_PER_BUYER="$RATE_LIMIT_PER_BUYER" \
  REDIS_KEY_PREFIX="loadtest:$DB:" RECONCILE_INTERVAL_MS=0 RUST_LOG=warn HTTP_WORKERS="$HTTP_WORKERS" \
  taskset -c "$SERVER_CPUS" "${SERVER_BIN:-target/release/goods-server}" &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/health/ready" >/dev/null && break; sleep 0.1; done

product=$(curl -sf -X POST "$BASE/products" "${SELLER[@]}" -d '{"name":"load","stockQuantity":10}' | sed 's/.*"productId":\([0-9]*\).*/\1/')
open=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ); close=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
drop=$(curl -sf -X POST "$BASE/limited-drops" "${SELLER[@]}" \
  -d "{\"productId\":$product,\"openAt\":\"$open\",\"closeAt\":\"$close\",\"limitedQuantity\":1}" | sed 's/.*"dropId":\([0-9]*\).*/\1/')
curl -sf -X POST "$BASE/limited-drops/$drop/orders" -H 'X-User-Id: 2' -H 'Idempotency-Key: first' -H 'Content-Type: application/json' -d '{"quantity":1}' >/dev/null

echo "== GATE=$GATE, $THREADS threads, $CONNECTIONS connections, $ROUNDS rounds of $DURATION each, server on CPU $SERVER_CPUS ($HTTP_WORKERS workers), wrk on CPU $WRK_CPUS"
rps() { echo "$1" | awk '/Requests\/sec/ {print $2}'; }
requests() { echo "$1" | awk '/requests in/ {print $1}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
before=$(curl -sf "$BASE/limited-drops/$drop/stats" "${SELLER[@]}" | sed 's/.*"soldOutRejectCount":\([0-9]*\).*/\1/')
live_all=(); sold_all=(); ratios=(); sent=0
for round in $(seq 1 "$ROUNDS"); do
  live=$(taskset -c "$WRK_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "$BASE/health/live")
  sold=$(DROP_ID="$drop" taskset -c "$WRK_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s loadtest/wrk/purchase.lua "$BASE")
  # Every answer must be a non-2xx (wrk counts them); which status they were is checked below.
  non2xx=$(echo "$sold" | awk '/Non-2xx or 3xx responses/ {print $5}')
  if [ "${non2xx:-0}" != "$(requests "$sold")" ]; then
    echo "FAIL: sold-out round $round: $(requests "$sold") answers, only ${non2xx:-0} non-2xx"; exit 1
  fi
  live_all+=("$(rps "$live")"); sold_all+=("$(rps "$sold")"); sent=$((sent + $(requests "$sold")))
  ratios+=("$(awk -v a="$(rps "$sold")" -v b="$(rps "$live")" 'BEGIN {printf "%.3f", a/b}')")
  echo "  round $round: live $(rps "$live") req/s, sold-out $(rps "$sold") req/s, ratio ${ratios[-1]}"
done
echo "  last sold-out round:"; echo "$sold" | sed 's/^/    /'
after=$(curl -sf "$BASE/limited-drops/$drop/stats" "${SELLER[@]}")
recon=$(curl -sf "$BASE/limited-drops/$drop/reconciliation" "${SELLER[@]}")
live_median=$(printf '%s\n' "${live_all[@]}" | median)
sold_median=$(printf '%s\n' "${sold_all[@]}" | median)
ratio=$(printf '%s\n' "${ratios[@]}" | median)
refused=$(( $(echo "$after" | sed 's/.*"soldOutRejectCount":\([0-9]*\).*/\1/') - before ))
echo "== summary (medians of $ROUNDS rounds)"
echo "  /health/live            $live_median req/s"
echo "  sold-out purchases      $sold_median req/s"
echo "  ratio                   $ratio (median of the rounds' ratios; rounds $(printf '%s ' "${ratios[@]}"))"
echo "  SOLD_OUT answers        $refused, wrk completed $sent (wrk does not count requests in flight when it stops)"
echo "  stats                   $after"
echo "  reconciliation          $recon"

# Untimed: what the answers were (the counting script slows wrk, so it stays out of the rounds).
statuses=$(DROP_ID="$drop" taskset -c "$WRK_CPUS" wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s loadtest/wrk/sale.lua "$BASE" | awk '$1 == "status"')
echo "  answers by status       $(echo "$statuses" | tr '\n' ' ')"
fail=0
if echo "$statuses" | awk '$2 != 409 {bad += $3} END {exit bad > 0 ? 0 : 1}'; then
  echo "FAIL: answers other than 409 on the sold-out drop"; fail=1
fi
# Every timed answer was a SOLD_OUT the server counted: at least wrk's completed requests, and at
# most those plus one in flight per connection when each round stopped.
if [ "$refused" -lt "$sent" ] || [ "$refused" -gt $((sent + CONNECTIONS * ROUNDS)) ]; then
  echo "FAIL: the server counted $refused SOLD_OUT answers, wrk completed $sent (allowed up to $((sent + CONNECTIONS * ROUNDS)) with those in flight)"; fail=1
fi
if ! awk -v r="$ratio" -v min="$MIN_RATIO" 'BEGIN {exit (r >= min) ? 0 : 1}'; then
  echo "FAIL: sold-out purchases at $ratio of live, below $MIN_RATIO"; fail=1
fi
exit "$fail"
