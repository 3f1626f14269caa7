// A limited drop's opening second: a spike of buyers on one drop, classified as SLIs
// (the load-test method note): good / bad / domain rejection (excluded) / input error (excluded) / test-data
// error (invalidates the run). Latency SLOs use valid events only; consistency must be 100%.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e RATE=10000 -e RAMP=2s -e DURATION=10s -e LIMITED=3000 loadtest/k6/drop-spike.js
//
// The arrival rate ramps from 0 to RATE over RAMP (the opening's rush), holds it for DURATION,
// and starts when the drop opens (OPEN_IN seconds after set-up). k6 reports the rate it reached
// (http_reqs) and the iterations it could not start for lack of VUs (dropped_iterations): a
// generator that falls behind shows there, not as a faster server.
//
// loadtest/drop-spike.sh runs it and adds the checks k6 cannot make alone: the drop sold out
// exactly, and the client's count of 202s equals what the database sold and what stats count.
//
// Optional paying step: PAY_SHARE (0 to 1, default 0) of the winners pay their order right after
// the 202, as the payment provider confirms it: a signed event to POST /payments/events (the
// server's PAYMENT_WEBHOOK_SECRET, given here as WEBHOOK_SECRET); with EXPIRE_WAIT seconds (run the server with a PAYMENT_WINDOW_S shorter than that) the
// teardown waits for the others to expire, and checks paid + pending + expired = what was bought,
// sold = paid + pending, and that the units of the expired orders went back to the stock.
//
// The server must trust identity headers (AUTH_MODE=trusted-header, the loopback default).
// Every request carries X-Load-Test-Run-Id so server traces and logs can be matched to the run.
import http from 'k6/http';
import { check, sleep } from 'k6';
import { paySigned } from './lib/payment.js';
import { DOMAIN_REJECTIONS, INPUT_ERRORS, TEST_DATA_ERRORS, safeField } from './lib/sli.js';
import { Counter, Rate, Trend } from 'k6/metrics';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const RATE = Number(__ENV.RATE || 1000);
const DURATION = __ENV.DURATION || '20s';
const RAMP = __ENV.RAMP || '2s';
const PRE_VUS = Number(__ENV.PRE_VUS || Math.min(RATE, 1000));
const MAX_VUS = Number(__ENV.MAX_VUS || Math.min(RATE * 2, 3000));
const LIMITED = Number(__ENV.LIMITED || 500);
const OPEN_IN_SECONDS = Number(__ENV.OPEN_IN || 2);
const RUN_ID = __ENV.RUN_ID || `drop-spike-${Date.now()}`;
const PAY_SHARE = Number(__ENV.PAY_SHARE || 0);
const EXPIRE_WAIT = Number(__ENV.EXPIRE_WAIT || 0);
const WEBHOOK_SECRET = __ENV.WEBHOOK_SECRET || '';
if (PAY_SHARE > 0 && !WEBHOOK_SECRET) {
  throw new Error('PAY_SHARE needs WEBHOOK_SECRET: the server\'s PAYMENT_WEBHOOK_SECRET');
}

// Classification by the body's `code`: lib/sli.js (a purchase's classes, checked against
// docs/observability.md; sizes-spike.js uses the same).
// Every buyer and key here is new, so these are classified as the table says but cannot be
// the buyers' doing: counted apart, with a threshold of 0.
const IMPOSSIBLE_HERE = new Set([
  'PER_USER_LIMIT_EXCEEDED', 'ORDER_LIMIT_REACHED', 'IDEMPOTENCY_KEY_IN_PROGRESS', 'IDEMPOTENCY_KEY_REUSED',
  'RATE_LIMITED',
]);

const availability = new Rate('sli_availability');          // good / (good + bad)
const apiDuration = new Trend('api_duration', true);         // valid events only
const rejectionDuration = new Trend('rejection_duration', true);
const domainRejections = new Counter('business_rejections');
const inputErrors = new Counter('input_errors');
const testDataErrors = new Counter('test_data_errors');
const impossibleOutcomes = new Counter('impossible_outcomes');
const consistency = new Rate('consistency');
const accepted = new Counter('accepted');                    // the client's count of 202s
const acceptedDuration = new Trend('accepted_duration', true); // admitted purchases (202) only
const validEvents = new Counter('valid_events');             // good + bad
const paid = new Counter('paid');                            // the client's count of paid orders

export const options = {
  discardResponseBodies: false,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
  scenarios: {
    spike: {
      executor: 'ramping-arrival-rate',
      startRate: 0,
      timeUnit: '1s',
      startTime: `${OPEN_IN_SECONDS}s`,
      stages: [
        { target: RATE, duration: RAMP },
        { target: RATE, duration: DURATION },
      ],
      preAllocatedVUs: PRE_VUS,
      maxVUs: MAX_VUS,
    },
  },
  thresholds: {
    sli_availability: ['rate>=0.999'],
    api_duration: ['p(95)<800', 'p(99)<1500'],
    accepted_duration: ['p(95)<800'],
    rejection_duration: ['p(95)<200'],
    test_data_errors: ['count==0'],
    impossible_outcomes: ['count==0'],
    consistency: ['rate==1'],
    // A run with no valid event measured nothing and must not pass.
    valid_events: ['count>0'],
  },
};

const SELLER = { 'X-User-Id': '1', 'X-User-Role': 'seller', 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': RUN_ID };

export function setup() {
  const product = http.post(`${BASE}/products`, JSON.stringify({ name: 'k6 drop', stockQuantity: LIMITED }), { headers: SELLER });
  check(product, { 'product created': (r) => r.status === 201 });
  const openAt = new Date(Date.now() + OPEN_IN_SECONDS * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const closeAt = new Date(Date.now() + 3600 * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const drop = http.post(`${BASE}/limited-drops`, JSON.stringify({
    productId: product.json('productId'), openAt, closeAt, limitedQuantity: LIMITED, perUserLimit: 1,
  }), { headers: SELLER });
  check(drop, { 'drop created': (r) => r.status === 201 });
  return { dropId: drop.json('dropId'), productId: product.json('productId') };
}

export default function (data) {
  const user = 1000000 + (__VU * 100000) + __ITER;
  const res = http.post(`${BASE}/limited-drops/${data.dropId}/orders`, JSON.stringify({ quantity: 1 }), {
    headers: {
      'X-User-Id': String(user),
      'Idempotency-Key': `k6-${RUN_ID}-${user}`,
      'Content-Type': 'application/json',
      'X-Load-Test-Run-Id': RUN_ID,
    },
    tags: { name: '/limited-drops/{dropId}/orders' },
  });
  const code = res.status >= 400 && res.status < 500 ? safeCode(res) : null;
  if (res.status === 202) {
    availability.add(true);
    apiDuration.add(res.timings.duration);
    accepted.add(1);
    acceptedDuration.add(res.timings.duration);
    validEvents.add(1);
    // A deterministic share of the winners pays (spread over VUs and iterations by two primes).
    if (PAY_SHARE > 0 && ((__VU * 7919) + (__ITER * 104729)) % 1000 < PAY_SHARE * 1000) {
      const pay = paySigned(BASE, WEBHOOK_SECRET, RUN_ID, user, {
        orderId: res.json('orderId'), amountMinor: res.json('amountMinor'), currency: res.json('currency'),
      });
      const ok = pay.status === 200 && safeField(pay, 'outcome') === 'PAID';
      availability.add(ok);
      apiDuration.add(pay.timings.duration);
      validEvents.add(1);
      if (ok) {
        paid.add(1);
      }
    }
  }
  if (code && IMPOSSIBLE_HERE.has(code)) {
    impossibleOutcomes.add(1, { code });
  }
  if (res.status === 202) {
    return;
  }
  if (code && DOMAIN_REJECTIONS.has(code)) {
    domainRejections.add(1, { code });
    rejectionDuration.add(res.timings.duration);
  } else if (code && INPUT_ERRORS.has(code)) {
    inputErrors.add(1, { code });
  } else if (code && TEST_DATA_ERRORS.has(code)) {
    testDataErrors.add(1, { code });
  } else {
    // 5xx, timeouts (status 0), THROTTLED and anything unclassified count against the SLO.
    availability.add(false);
    apiDuration.add(res.timings.duration);
    validEvents.add(1);
  }
}

function safeCode(res) {
  return safeField(res, 'code');
}


export function teardown(data) {
  if (EXPIRE_WAIT > 0) {
    // The unpaid orders expire meanwhile (the healing pass, every RECONCILE_INTERVAL_MS).
    sleep(EXPIRE_WAIT);
  }
  const recon = http.get(`${BASE}/limited-drops/${data.dropId}/reconciliation`, { headers: SELLER });
  const stats = http.get(`${BASE}/limited-drops/${data.dropId}/stats`, { headers: SELLER });
  const product = http.get(`${BASE}/products/${data.productId}`, { headers: SELLER });
  const r = recon.json();
  const s = stats.json();
  const sold = r.soldQuantity;
  consistency.add(r.oversold === false, { check: 'not oversold' });
  consistency.add(sold <= LIMITED, { check: 'sold within limit' });
  consistency.add(product.json('stockQuantity') + sold === LIMITED, { check: 'stock + sold constant' });
  consistency.add(r.paidQuantity + r.pendingQuantity === sold, { check: 'sold = paid + pending' });
  if (EXPIRE_WAIT > 0) {
    consistency.add(r.pendingQuantity === 0, { check: 'every unpaid order expired' });
  }
  console.log(`reconciliation ${JSON.stringify(r)}`);
  console.log(`stats ${JSON.stringify(s)}`);
  // loadtest/drop-spike.sh reads these to compare with the client's count of 202s.
  console.log(`DROP_RESULT sold=${sold} success=${s.successCount} paid=${r.paidQuantity} pending=${r.pendingQuantity} expired=${r.expiredQuantity} cancelled=${r.cancelledQuantity} drop=${data.dropId}`);
}
