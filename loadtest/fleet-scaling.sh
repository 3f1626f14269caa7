#!/usr/bin/env bash
# Fleet scaling on this machine: 1, 2 and 3 instances behind HAProxy (deploy/haproxy/haproxy.cfg),
# MariaDB and Redis (GATE=redis), the same generator, one run. For each fleet size:
#   - a sell-out of LIMITED units over HTTP through the balancer (goods-bench's http_sellout,
#     which fails on its own checks: client 202s = database sold = stats successCount = LIMITED);
#   - sold-out refusals per second through the balancer (wrk, a new buyer per request);
#   - /health/live per second through the balancer, the same way (the balancer's own ceiling).
# Fails when a sell-out's checks fail, the sold-out drop answers anything but 409 (timed: every
# answer non-2xx; untimed: every status 409), or /health/live answers anything but 2xx.
#
#   loadtest/fleet-scaling.sh        # LIMITED=20000 CONNECTIONS=64 DURATION=5s
#
# Needs release builds (cargo build --release -p goods-server -p goods-bench), wrk, haproxy,
# MariaDB and Redis on loopback. Loopback only; it stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
DURATION="${DURATION:-5s}"
SIZES="${SIZES:-1 2 3}"
MYSQL="${TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
REDIS="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"
hostport="${MYSQL#mysql://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
sql() { mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -N -e "$1"; }
WORK="$(mktemp -d)"
PIDS=()
DBS=()
stop_all() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; for db in "${DBS[@]}"; do sql "DROP DATABASE IF EXISTS $db"; done; rm -rf "$WORK"' EXIT

# CPU time (ms) of processes, from /proc: what each part costs per request.
cpu_ms() { local t=0 pid; for pid in "$@"; do
  t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0))); done
  echo $((t * 1000 / $(getconf CLK_TCK))); }
REDIS_PID=$(pgrep -x redis-server | head -1)
MARIADB_PID=$(pgrep -x mariadbd | head -1)

. scripts/lib/ports.sh  # free_port, free_ports N
seller=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')

new_drop() { # $1 base, $2 units: prints the drop id of a drop open now
  local product open close
  product=$(curl -sf "${seller[@]}" -d "{\"name\":\"scale\",\"stockQuantity\":$2}" "$1/products" | python3 -c 'import json,sys; print(json.load(sys.stdin)["productId"])')
  open=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ); close=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
  curl -sf "${seller[@]}" -d "{\"productId\":$product,\"openAt\":\"$open\",\"closeAt\":\"$close\",\"limitedQuantity\":$2,\"perUserLimit\":1}" \
    "$1/limited-drops" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dropId"])'
}

wrk_rate() { # $1 = 2xx or non-2xx, wrk output on stdin: requests/s, failing (exit 1) unless
  # every answer was what $1 says (the sold-out run's statuses are checked separately, untimed)
  local out total non; out=$(cat)
  total=$(echo "$out" | awk '/requests in/ {print $1}')
  non=$(echo "$out" | awk '/Non-2xx or 3xx responses/ {print $5}'); non="${non:-0}"
  case "$1" in
    2xx) [ "$non" = 0 ] || { echo "FAIL: $non of $total answers were not 2xx" >&2; return 1; } ;;
    non-2xx) [ "$non" = "$total" ] || { echo "FAIL: $((total - non)) of $total answers were 2xx" >&2; return 1; } ;;
  esac
  [ "${total:-0}" -gt 0 ] || { echo "FAIL: wrk completed no request" >&2; return 1; }
  echo "$out" | awk '/Requests\/sec/ {printf "%d", $2}'
}

printf '| instances | sell-out of %s: orders/s | sold-out refusals/s | /health/live via the balancer /s |\n|---|---|---|---|\n' "$LIMITED" >"$WORK/table"
printf '| instances | per purchase: goods-server / Redis / MariaDB / HAProxy CPU µs | per refusal: goods-server / Redis / MariaDB / HAProxy CPU µs |\n|---|---|---|\n' >"$WORK/costs"
for n in $SIZES; do
  db="scale_${n}_$(date +%s)"; DBS+=("$db")
  sql "CREATE DATABASE $db"
  DATABASE_URL="$MYSQL/$db" target/release/goods-server migrate >"$WORK/migrate.log" 2>&1
  ports=()
  for i in $(seq 1 "$n"); do
    port=$(free_port); ports+=("$port")
    AUTH_MODE=trusted-header BIND_ADDR="127.0.0.1:$port" DATABASE_URL="$MYSQL/$db" \
      GATE=redis REDIS_URL="$REDIS" REDIS_KEY_PREFIX="scale:$db:" RECONCILE_INTERVAL_MS=1000 \
      HTTP_WORKERS=2 RUST_LOG=warn target/release/goods-server >"$WORK/server-$i.log" 2>&1 &
    PIDS+=("$!")
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
  done
  lb=$(free_port)
  GOODS_LB_BIND="127.0.0.1:$lb" GOODS_1="127.0.0.1:${ports[0]}" GOODS_2="127.0.0.1:${ports[$((1 % n))]}" \
    GOODS_3="127.0.0.1:${ports[$((2 % n))]}" GOODS_LB_RATE_10S=1000000000 haproxy -db -f deploy/haproxy/haproxy.cfg >"$WORK/haproxy.log" 2>&1 &
  PIDS+=("$!")
  base="http://127.0.0.1:$lb"
  for _ in $(seq 100); do curl -sf "$base/health/ready" >/dev/null && break; sleep 0.1; done

  servers=("${PIDS[@]:0:$n}"); haproxy_pid="${PIDS[$n]}"
  costs() { echo "$(cpu_ms "${servers[@]}") $(cpu_ms "$REDIS_PID") $(cpu_ms "$MARIADB_PID") $(cpu_ms "$haproxy_pid")"; }
  per() { # before after count: CPU µs per request for each part
    python3 -c 'import sys; b=list(map(int,sys.argv[1].split())); a=list(map(int,sys.argv[2].split())); n=int(sys.argv[3]); print(" / ".join(str(round((y-x)*1000/n)) for x,y in zip(b,a)))' "$1" "$2" "$3"; }
  echo "== $n instance(s): sell-out of $LIMITED through the balancer"
  before=$(costs)
  out=$(BASE="$base" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" target/release/http_sellout) ||
    { echo "$out"; echo "FAIL: the sell-out's checks failed with $n instance(s)"; exit 1; }
  echo "$out" | tail -3
  orders=$(echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*/\1/p')
  requests=$(echo "$out" | sed -n 's/.*accepted=\([0-9]*\).*refused=\([0-9]*\).*/\1/p')
  purchase_cost=$(per "$before" "$(costs)" "$requests")

  drop=$(new_drop "$base" 1)
  curl -sf -H "X-User-Id: 7" -H "Idempotency-Key: first" -H "Content-Type: application/json" -d "{\"quantity\":1}" "$base/limited-drops/$drop/orders" >/dev/null # sells the unit
  before=$(costs)
  refused_out=$(DROP_ID="$drop" wrk -t2 -c"$CONNECTIONS" -d"$DURATION" -s loadtest/wrk/purchase.lua "$base")
  refused=$(echo "$refused_out" | wrk_rate non-2xx) || { echo "$refused_out"; exit 1; }
  total=$(echo "$refused_out" | awk '/requests in/ {print $1}')
  refusal_cost=$(per "$before" "$(costs)" "$total")
  # Untimed: which statuses they were (the counting script slows wrk): 409 only.
  statuses=$(DROP_ID="$drop" wrk -t2 -c"$CONNECTIONS" -d2s -s loadtest/wrk/sale.lua "$base" | awk '$1 == "status"')
  if ! echo "$statuses" | awk '$2 != 409 {bad += $3} $2 == 409 {ok += $3} END {exit (bad == 0 && ok > 0) ? 0 : 1}'; then
    echo "$statuses"; echo "FAIL: answers other than 409 on the sold-out drop (or none)"; exit 1
  fi
  stats=$(curl -sf "${seller[@]}" "$base/limited-drops/$drop/stats")
  live=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" "$base/health/live" | wrk_rate 2xx) || exit 1
  echo "   sold-out refusals $refused/s ($total requests, all non-2xx; stats $stats); /health/live $live/s"
  printf '| %s | %s | %s | %s |\n' "$n" "$orders" "$refused" "$live" >>"$WORK/table"
  printf '| %s | %s | %s |\n' "$n" "$purchase_cost" "$refusal_cost" >>"$WORK/costs"
  stop_all
done
echo
cat "$WORK/table"
echo
cat "$WORK/costs"
