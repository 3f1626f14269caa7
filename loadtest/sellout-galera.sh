#!/usr/bin/env bash
# What synchronous replication costs a sell-out: orders committed per second on one hot drop
# (20,000 units, group commit, GATE=redis, the http_sellout generator) on a three-node MariaDB
# Galera Cluster against one MariaDB node, alternately in one run (ROUNDS each, default 3).
# Both are started here with the same mariadbd settings (scripts/galera-cluster's; the single
# node without the Galera provider), on free loopback ports, and stopped at the end. The server
# is given the cluster as one DATABASE_URL of three hosts and writes through the first.
#
#   loadtest/sellout-galera.sh               # LIMITED=20000 CONNECTIONS=64 ROUNDS=3
#
# Fails unless every sell-out passes its own checks (client 202s = database sold = stats
# successCount = LIMITED, only 202 and SOLD_OUT) and, on the cluster, every node holds exactly
# LIMITED orders of the drop after the run and reports no certification failure or
# brute-force abort (the fleet writes through one node). Needs a release build (cargo build --release -p
# goods-server -p goods-bench), mariadbd, galera-4, rsync, Redis on loopback; run as root
# (mariadbd runs as the mysql user). Loopback only; it stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18083}"
. loadtest/lib/release-server.sh

work="$(mktemp -d)"
chmod o+x "$work"
single_pid=""
finish() {
  stop_release_server || true
  [ -n "$single_pid" ] && kill -9 "$single_pid" 2>/dev/null || true
  for pidfile in "$work"/galera/*.pid; do
    [ -e "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap finish EXIT

echo "== a three-node Galera Cluster (scripts/galera-cluster)"
cluster=$(timeout 180 scripts/galera-cluster "$work/galera")
echo "$cluster"

echo "== one MariaDB node, the same settings without Galera"
single_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mariadb-install-db --no-defaults --datadir="$work/single" --auth-root-authentication-method=normal \
  --user=mysql --skip-test-db >"$work/single-install.log" 2>&1
chown -R mysql:mysql "$work/single"
mariadbd --no-defaults --user=mysql --datadir="$work/single" --socket="$work/single/mysqld.sock" \
  --port="$single_port" --bind-address=127.0.0.1 --skip-log-bin --max-connections=500 \
  --innodb-buffer-pool-size=128M --binlog-format=ROW --innodb-autoinc-lock-mode=2 \
  --default-storage-engine=InnoDB >"$work/single.log" 2>&1 &
single_pid=$!
for _ in $(seq 1 300); do mariadb -h 127.0.0.1 -P "$single_port" -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
mariadb -h 127.0.0.1 -P "$single_port" -u root -e 'SELECT 1' >/dev/null ||
  { echo "FAIL: the single node did not start"; tail -5 "$work/single.log"; exit 1; }
single="mysql://root@127.0.0.1:$single_port"

# One sell-out on DATABASE url $2 (label $1): its orders/s, after its checks.
sellout() {
  local label="$1" url="$2" out status=0
  TEST_MYSQL_URL="$url" start_release_server "galera_$label" "$PORT" RECONCILE_INTERVAL_MS=0 >&2
  out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" "$SELLOUT_BIN") || status=$?
  echo "$out" | sed "s/^/[$label] /" >&2
  [ "$status" = 0 ] || { echo "FAIL: the sell-out's checks failed on $label" >&2; exit 1; }
  if [ "$label" = cluster ]; then
    local hostport n
    for hostport in $(echo "${url#mysql://root@}" | tr ',' ' '); do
      n=$(mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -N \
        -e "SET SESSION wsrep_sync_wait = 1; SELECT COUNT(*) FROM $DB.orders")
      echo "[cluster] node $hostport holds $n orders" >&2
      [ "$n" = "$LIMITED" ] || { echo "FAIL: node $hostport holds $n orders, want $LIMITED" >&2; exit 1; }
      # One node written through: no transaction lost certification or was aborted by a
      # replicated one (the counters of the cluster's whole life, so of every round so far).
      conflicts=$(mariadb -h "${hostport%%:*}" -P "${hostport##*:}" -u root -N -e \
        "SHOW STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')" |
        awk '{s += $2} END {print s + 0}')
      echo "[cluster] node $hostport: $conflicts certification failures and brute-force aborts" >&2
      [ "$conflicts" = 0 ] || { echo "FAIL: certification conflicts on $hostport" >&2; exit 1; }
    done
  fi
  stop_release_server
  SERVER=""; DB=""
  echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*/\1/p'
}

singles=(); clusters=()
for round in $(seq 1 "$ROUNDS"); do
  # Each sell-out runs in a subshell of its own (its server and database go when it ends).
  rate=$(sellout single "$single"); singles+=("$rate")
  rate=$(sellout cluster "$cluster"); clusters+=("$rate")
  echo "== round $round: one node ${singles[-1]} orders/s, three-node cluster ${clusters[-1]} orders/s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
m1=$(median "${singles[@]}"); m3=$(median "${clusters[@]}")
echo "== median of $ROUNDS: one node $m1 orders/s, three-node cluster $m3 orders/s: ratio $(awk -v a="$m3" -v b="$m1" 'BEGIN {printf "%.2f", a / b}')"
