#!/usr/bin/env bash
# A sale with Redis paused (SIGSTOP) mid-way: does the service keep selling exactly, and how long
# after Redis resumes is the gate back in agreement with the database?
#
#   loadtest/fault-redis-pause.sh                       # 5,000 units, 15 s of wrk, 1 s pause at 1 s
#   LIMITED=500 PAUSE_S=2 loadtest/fault-redis-pause.sh
#
# Reports units sold, the client's count of 202s, 5xx answers, drift, and the heal time: from
# SIGCONT until the drop is sold out with drift 0 (polled every 50 ms while wrk goes on). Fails (exit 1) unless the drop sold out exactly, the 202s equal what the
# database sold, no answer was a 5xx, and the gate healed within HEAL_LIMIT_S.
#
# Needs wrk, redis-server (a private one is started and paused; the machine's Redis is not
# touched), MariaDB at TEST_MYSQL_URL, and a release build (cargo build --release -p goods-server).
# Loopback only; wrk stops after DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-5000}"
DURATION="${DURATION:-15s}"
CONNECTIONS="${CONNECTIONS:-64}"
PAUSE_AT_S="${PAUSE_AT_S:-1}"
PAUSE_S="${PAUSE_S:-1}"
HEAL_LIMIT_S="${HEAL_LIMIT_S:-15}"
RECONCILE_INTERVAL_MS="${RECONCILE_INTERVAL_MS:-1000}"
MYSQL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
DB="loadfault_$(date +%s)"
PORT="${PORT:-18081}"
REDIS_PORT="${REDIS_PORT:-16399}"
BASE="http://127.0.0.1:$PORT"
SELLER=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')

hostport="${MYSQL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "CREATE DATABASE $DB"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
REDIS=$!
trap 'kill -CONT "$REDIS" 2>/dev/null; kill "$SERVER" "$REDIS" 2>/dev/null || true; wait 2>/dev/null || true;
      mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -e "DROP DATABASE IF EXISTS $DB"' EXIT
for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$PORT" DATABASE_URL="$MYSQL/$DB" DATABASE_MIGRATE=true GATE=redis REDIS_URL="redis://127.0.0.1:$REDIS_PORT" \
  RECONCILE_INTERVAL_MS="$RECONCILE_INTERVAL_MS" RUST_LOG=error target/release/goods-server &
SERVER=$!
for _ in $(seq 1 100); do curl -sf "$BASE/health/ready" >/dev/null && break; sleep 0.1; done

product=$(curl -sf -X POST "$BASE/products" "${SELLER[@]}" -d "{\"name\":\"fault\",\"stockQuantity\":$LIMITED}" | sed 's/.*"productId":\([0-9]*\).*/\1/')
open=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ); close=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
drop=$(curl -sf -X POST "$BASE/limited-drops" "${SELLER[@]}" \
  -d "{\"productId\":$product,\"openAt\":\"$open\",\"closeAt\":\"$close\",\"limitedQuantity\":$LIMITED,\"perUserLimit\":1}" | sed 's/.*"dropId":\([0-9]*\).*/\1/')

echo "== drop $drop: $LIMITED units; wrk $CONNECTIONS connections for $DURATION; Redis paused at ${PAUSE_AT_S}s for ${PAUSE_S}s"
DROP_ID="$drop" wrk -t2 -c"$CONNECTIONS" -d"$DURATION" -s loadtest/wrk/sale.lua "$BASE" >"/tmp/$DB.wrk" &
WRK=$!
sleep "$PAUSE_AT_S"
kill -STOP "$REDIS"; sleep "$PAUSE_S"; kill -CONT "$REDIS"
resumed=$(date +%s%N)

recon() { curl -sf "$BASE/limited-drops/$drop/reconciliation" "${SELLER[@]}"; }
field() { echo "$1" | sed "s/.*\"$2\":\([-0-9a-z]*\).*/\1/"; }
healed_ms=""; sold_out_ms=""
for _ in $(seq 1 $((HEAL_LIMIT_S * 20))); do
  r=$(recon)
  if [ "$(field "$r" soldQuantity)" = "$LIMITED" ]; then
    sold_out_ms=${sold_out_ms:-$(( ($(date +%s%N) - resumed) / 1000000 ))}
    if [ "$(field "$r" drift)" = "0" ]; then
      healed_ms=$(( ($(date +%s%N) - resumed) / 1000000 )); break
    fi
  fi
  sleep 0.05
done
wait "$WRK"
r=$(recon)
sold=$(field "$r" soldQuantity); drift=$(field "$r" drift)
ok202=$(awk '$1 == "status" && $2 == 202 {print $3}' "/tmp/$DB.wrk"); ok202=${ok202:-0}
fivexx=$(awk '$1 == "status" && $2 >= 500 {n += $3} END {print n + 0}' "/tmp/$DB.wrk")
grep -E "Requests/sec|requests in|^status" "/tmp/$DB.wrk"
echo "sold $sold of $LIMITED; client 202s $ok202; 5xx $fivexx; drift $drift; after Redis resumed: sold out at ${sold_out_ms:-never} ms, drift 0 at ${healed_ms:-never} ms"
rm -f "/tmp/$DB.wrk"
fail=0
[ "$sold" = "$LIMITED" ] || { echo "FAIL: the drop did not sell out exactly"; fail=1; }
[ "$ok202" = "$sold" ] || { echo "FAIL: the client's 202s ($ok202) are not what the database sold ($sold)"; fail=1; }
[ "$fivexx" = "0" ] || { echo "FAIL: $fivexx answers were 5xx"; fail=1; }
[ -n "$healed_ms" ] || { echo "FAIL: not sold out with drift 0 within ${HEAL_LIMIT_S}s of the resume"; fail=1; }
exit "$fail"
