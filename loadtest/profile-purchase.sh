#!/usr/bin/env bash
# Where the server's CPU goes for an admitted purchase, against a sold-out refusal, in one run
# (issue 31's first step). A release server on MariaDB + Redis (GATE=redis, production mode):
#
#   1. a sell-out of LIMITED units (http_sellout, CONNECTIONS buyers back to back), the server
#      sampled by perf (cpu-clock, DWARF call graphs) from before the opening to the last answer;
#   2. a sold-out drop refusing new buyers for REFUSE_FOR (wrk, purchase.lua), sampled the same way.
#
# For each: the server's CPU per request from /proc around the phase (user + system time over the
# requests answered), a flame graph (inferno) and a table of where the samples went, by part of
# the service (loadtest/lib/profile-table.py), written to OUT (default docs/profiles). Fails when
# the sell-out's own checks fail or a refusal is not a 409.
#
#   loadtest/profile-purchase.sh        # LIMITED=20000 CONNECTIONS=64 REFUSE_FOR=5s
#   PROFILE=0 SERVER_BIN=... loadtest/profile-purchase.sh   # the CPU per request alone, no perf
#                                       # (a minute a run instead of five: for A/B rounds)
#   PROFILE=0 SYSCALLS=1 loadtest/profile-purchase.sh   # and the system calls per request, by
#                                       # kind (perf stat), with the context switches
#
# Every run prints the context switches of the server's threads per request (from /proc).
#
# Needs perf (linux-perf), inferno (cargo install inferno), wrk, a release build with debug info
# (the workspace's release profile keeps it): cargo build --release -p goods-server -p goods-bench.
# Loopback only; it stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-20000}"
CONNECTIONS="${CONNECTIONS:-64}"
REFUSE_FOR="${REFUSE_FOR:-5s}"
FREQUENCY="${FREQUENCY:-499}"
OUT="${OUT:-docs/profiles}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18084}"
PROFILE="${PROFILE:-1}"
SYSCALLS="${SYSCALLS:-0}"
# SYSCALLS=1: the server's system calls by kind, counted by perf stat over each phase.
SYSCALL_EVENTS=raw_syscalls:sys_enter
for call in read write writev recvfrom sendto epoll_wait futex; do
  SYSCALL_EVENTS="$SYSCALL_EVENTS,syscalls:sys_enter_$call"
done
tools=(wrk); [ "$PROFILE" = 0 ] || tools+=(perf inferno-collapse-perf inferno-flamegraph)
[ "$SYSCALLS" = 0 ] || tools+=(perf)
for bin in "${tools[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || { echo "FAIL: $bin not found (perf: apt-get install linux-perf; inferno: cargo install inferno; wrk: apt-get install wrk)"; exit 1; }
done
. loadtest/lib/release-server.sh
work="$(mktemp -d)"
start_release_server profile "$PORT" RECONCILE_INTERVAL_MS=0 RATE_LIMIT_PER_IP=off
trap 'stop_release_server; rm -rf "$work"' EXIT
mkdir -p "$OUT"
declare -A US
tick_us=$((1000000 / $(getconf CLK_TCK)))
cpu_ticks() { awk '{print $14 + $15}' "/proc/$SERVER/stat"; }
# Context switches of every thread of the server (a thread that parks to wait, and is woken by
# another, switches once each way): the runtime's wake-ups, counted instead of sampled. A thread
# that ends during a phase takes its count with it (the runtime's blocking threads; rare here).
switches() { { cat /proc/"$SERVER"/task/*/status 2>/dev/null || true; } | awk '/ctxt_switches/ {n += $2} END {print n + 0}'; }
declare -A SW
record() { # NAME: perf on the server until SIGINT
  if [ "$SYSCALLS" = 1 ]; then
    perf stat -x, -e "$SYSCALL_EVENTS" -p "$SERVER" -o "$work/$1.stat" 2>/dev/null &
    STAT=$!
  fi
  if [ "$PROFILE" = 0 ]; then [ "$SYSCALLS" = 1 ] && sleep 0.5; return 0; fi
  perf record -q -e cpu-clock -F "$FREQUENCY" --call-graph dwarf,16384 -p "$SERVER" -o "$work/$1.data" 2>/dev/null &
  PERF=$!
  sleep 0.5
}
stop_recording() {
  if [ -n "${STAT:-}" ]; then kill -INT "$STAT"; wait "$STAT" || true; STAT=""; fi
  [ "$PROFILE" = 0 ] && return 0
  kill -INT "$PERF"; wait "$PERF" || true
}
syscalls_per_request() { # NAME REQUESTS: each counted event of the phase over its requests
  [ -f "$work/$1.stat" ] || return 0
  awk -F, -v n="$2" -v name="$1" '$1 ~ /^[0-9]+$/ {printf "== %s: %.2f %s per request\n", name, $1 / n, $3}' "$work/$1.stat"
}
report() { # NAME REQUESTS TICKS SWITCHES
  local name="$1" requests="$2" ticks="$3" us
  us=$(awk -v t="$ticks" -v u="$tick_us" -v n="$requests" 'BEGIN {printf "%.1f", t * u / n}')
  US[$name]="$us"
  SW[$name]=$(awk -v s="$4" -v n="$requests" 'BEGIN {printf "%.2f", s / n}')
  echo "== $name: ${SW[$name]} context switches of the server's threads per request"
  syscalls_per_request "$name" "$requests"
  if [ "$PROFILE" = 0 ]; then
    echo "== $name: $requests requests, $ticks ticks of server CPU: $us µs per request"
    return 0
  fi
  perf script -i "$work/$name.data" 2>/dev/null | inferno-collapse-perf --all > "$work/$name.folded"
  inferno-flamegraph --minwidth 2 --title "goods-server: $name ($requests requests, $us µs of CPU each)" \
    < "$work/$name.folded" > "$OUT/$name.svg"
  echo "== $name: $requests requests, $ticks ticks of server CPU: $us µs per request; flame graph $OUT/$name.svg"
  python3 loadtest/lib/profile-table.py "$work/$name.folded" "$us" | tee "$OUT/$name.md"
  # KEEP=DIR keeps the folded stacks (inferno-flamegraph, inferno-diff-folded read them).
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work/$name.folded" "$KEEP/"; fi
}

echo "== 1. a sell-out of $LIMITED units, $CONNECTIONS buyers at a time"
record admitted
before=$(cpu_ticks); sw_before=$(switches)
status=0
out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" "$SELLOUT_BIN") || status=$?
after=$(cpu_ticks); sw_after=$(switches)
stop_recording
echo "$out"
[ "$status" = 0 ] || { echo "FAIL: the sell-out's checks failed"; exit 1; }
report admitted "$LIMITED" $((after - before)) $((sw_after - sw_before))

echo "== 2. sold-out refusals for $REFUSE_FOR"
SELLER=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')
product=$(curl -sf -X POST "$BASE/products" "${SELLER[@]}" -d '{"name":"refused","stockQuantity":10}' | sed 's/.*"productId":\([0-9]*\).*/\1/')
open=$(date -u -d '-1 sec' +%Y-%m-%dT%H:%M:%SZ); close=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
drop=$(curl -sf -X POST "$BASE/limited-drops" "${SELLER[@]}" \
  -d "{\"productId\":$product,\"openAt\":\"$open\",\"closeAt\":\"$close\",\"limitedQuantity\":1}" | sed 's/.*"dropId":\([0-9]*\).*/\1/')
curl -sf -X POST "$BASE/limited-drops/$drop/orders" -H 'X-User-Id: 2' -H 'Idempotency-Key: first' \
  -H 'Content-Type: application/json' -d '{"quantity":1}' >/dev/null
stats() { curl -sf "$BASE/limited-drops/$drop/stats" "${SELLER[@]}" | sed 's/.*"soldOutRejectCount":\([0-9]*\).*/\1/'; }
refused_before=$(stats)
record refused
before=$(cpu_ticks); sw_before=$(switches)
DROP_ID="$drop" wrk -t2 -c"$CONNECTIONS" -d"$REFUSE_FOR" -s loadtest/wrk/purchase.lua "$BASE" > "$work/wrk.txt"
after=$(cpu_ticks); sw_after=$(switches)
stop_recording
refused=$(( $(stats) - refused_before ))
answers=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
non2xx=$(awk '/Non-2xx or 3xx responses/ {print $5}' "$work/wrk.txt")
[ "${non2xx:-0}" = "$answers" ] || { echo "FAIL: $answers answers, only ${non2xx:-0} refused"; exit 1; }
echo "wrk: $answers answers, all refused; the server counted $refused SOLD_OUT"
report refused "$refused" $((after - before)) $((sw_after - sw_before))
echo "== the server's peak resident memory: $(awk '/VmHWM/ {print $2, $3}' "/proc/$SERVER/status")"
echo "== an admitted purchase costs $(awk -v a="${US[admitted]}" -v r="${US[refused]}" 'BEGIN {printf "%.1f", a / r}')x a sold-out refusal (${US[admitted]} against ${US[refused]} µs)"
