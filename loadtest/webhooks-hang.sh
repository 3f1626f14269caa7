#!/usr/bin/env bash
# What sellers' webhooks cost a sale, and whether a receiver that hangs costs it more: the same
# sell-out on one release server (GATE=redis, MariaDB) with the seller having no endpoint, one
# endpoint whose receiver accepts connections and never answers (every delivery waits out
# WEBHOOK_TIMEOUT_MS), and one endpoint whose receiver answers 204 at once, in turn (ROUNDS,
# default 3). Each sell-out fails on its own checks (crates/goods-bench/src/bin/http_sellout.rs:
# client 202s = sold = successCount = LIMITED, only 202 and SOLD_OUT). Prints orders/s and the
# admitted purchases' p95 of each, and the medians.
#
#   loadtest/webhooks-hang.sh               # LIMITED=10000 CONNECTIONS=64 ROUNDS=3
#
# Needs a release build (cargo build --release -p goods-server -p goods-bench), MariaDB and Redis
# on loopback, python3. Loopback only; it stops by itself when the drops sell out.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITED="${LIMITED:-10000}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-3}"
SELLOUT_BIN="${SELLOUT_BIN:-target/release/http_sellout}"
PORT="${PORT:-18086}"
work="$(mktemp -d)"
receivers=()
cleanup() { for p in "${receivers[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }

# A receiver that accepts and never answers, and one that answers 204; each prints its port.
python3 -c '
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1024)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])
' > "$work/hang.port" &
receivers+=($!)
python3 -c '
import http.server
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(204); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
' > "$work/sink.port" &
receivers+=($!)
for f in hang sink; do
  for _ in $(seq 1 50); do [ -s "$work/$f.port" ] && break; sleep 0.1; done
done
HANG="http://127.0.0.1:$(cat "$work/hang.port")/hooks"
SINK="http://127.0.0.1:$(cat "$work/sink.port")/hooks"

. loadtest/lib/release-server.sh
start_release_server webhooks_hang "$PORT" RECONCILE_INTERVAL_MS=0 \
  WEBHOOK_ALLOW_PRIVATE=true WEBHOOK_ALLOW_HTTP=true WEBHOOK_TIMEOUT_MS=10000
trap 'stop_release_server; cleanup' EXIT

SELLER=(-H 'X-User-Id: 1' -H 'X-User-Role: seller' -H 'Content-Type: application/json')
endpoint=""
use_endpoint() { # URL, or nothing: the seller's one endpoint
  if [ -n "$endpoint" ]; then
    curl -sf -X DELETE "$BASE/webhook-endpoints/$endpoint" "${SELLER[@]}" >/dev/null
    endpoint=""
  fi
  if [ -n "${1:-}" ]; then
    endpoint=$(curl -sf -X POST "$BASE/webhook-endpoints" "${SELLER[@]}" -d "{\"url\":\"$1\"}" |
      sed 's/.*"endpointId":\([0-9]*\).*/\1/')
  fi
}
sellout() { # label
  local out rate p95
  out=$(BASE="$BASE" LIMITED="$LIMITED" CONNECTIONS="$CONNECTIONS" "$SELLOUT_BIN") ||
    { echo "$out"; echo "FAIL: the sell-out's checks failed ($1)"; exit 1; }
  rate=$(echo "$out" | sed -n 's/.*orders_per_s=\([0-9]*\).*/\1/p')
  p95=$(echo "$out" | sed -n 's/.*accepted_p95_ms=\([0-9.]*\).*/\1/p')
  echo "$rate $p95"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A rates p95s
for round in $(seq 1 "$ROUNDS"); do
  for kind in none hanging answering; do
    case "$kind" in
      none) use_endpoint "" ;;
      hanging) use_endpoint "$HANG" ;;
      answering) use_endpoint "$SINK" ;;
    esac
    read -r rate p95 < <(sellout "$kind")
    rates[$kind]+="$rate "; p95s[$kind]+="$p95 "
    echo "  round $round, $kind: $rate orders/s, admitted p95 $p95 ms"
  done
done
echo "== summary (medians of $ROUNDS rounds of $LIMITED units, $CONNECTIONS buyers at a time)"
for kind in none hanging answering; do
  echo "  $kind: $(printf '%s\n' ${rates[$kind]} | median) orders/s, admitted p95 $(printf '%s\n' ${p95s[$kind]} | median) ms"
done
