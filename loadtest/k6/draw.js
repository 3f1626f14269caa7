// A draw drop's life under load: a spike of entries at the opening, the draw once entries close,
// then a share of the winners paying while the rest let their orders expire into promotions off
// the waitlist. Outcomes are classified as SLIs by the body's `code`.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e RATE=2000 -e DURATION=10s -e LIMITED=300 \
//     -e PAY_SHARE=0.5 -e WEBHOOK_SECRET=... loadtest/k6/draw.js
//
// Scenarios, one after the other:
// - `entries`: new buyers enter at RATE/s (ramping over RAMP), from openAt for DURATION; entries
//   close ENTRY_GRACE seconds after the last.
// - `results`, DRAW_WAIT seconds after entries close (the server draws within one
//   RECONCILE_INTERVAL_MS): every buyer who entered reads their entry; winners pay with
//   probability PAY_SHARE (a signed provider event), the others leave their order to expire.
//
// loadtest/draw.sh runs it and checks what k6 cannot alone: the server counted exactly the
// client's 202 entries, the winners are the drop's units, and every unit given back went to the
// waitlist once. The server must trust identity headers (AUTH_MODE=trusted-header).
import http from 'k6/http';
import crypto from 'k6/crypto';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { paySigned } from './lib/payment.js';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const RATE = Number(__ENV.RATE || 1000);
const DURATION_S = Number(__ENV.DURATION_S || 10);
const RAMP = __ENV.RAMP || '2s';
const LIMITED = Number(__ENV.LIMITED || 300);
const OPEN_IN_SECONDS = Number(__ENV.OPEN_IN || 2);
const ENTRY_GRACE_S = Number(__ENV.ENTRY_GRACE || 3);
const DRAW_WAIT_S = Number(__ENV.DRAW_WAIT || 4);
const PAY_SHARE = Number(__ENV.PAY_SHARE || 0);
const WEBHOOK_SECRET = __ENV.WEBHOOK_SECRET || '';
const RUN_ID = __ENV.RUN_ID || `draw-${Date.now()}`;
const PRE_VUS = Number(__ENV.PRE_VUS || Math.min(RATE, 1000));
const MAX_VUS = Number(__ENV.MAX_VUS || Math.min(RATE * 2, 3000));
// Every entrant's id is 1,000,000 + the entry's iteration number in the test: the results phase
// reads them all back, and the ids of the iterations k6 dropped simply have no entry.
const RESULT_VUS = Number(__ENV.RESULT_VUS || 100);
const FIRST_USER = 1000000;
const PLANNED = Math.ceil(RATE * (DURATION_S + 2));
if (PAY_SHARE > 0 && !WEBHOOK_SECRET) {
  throw new Error('PAY_SHARE needs WEBHOOK_SECRET: the server\'s PAYMENT_WEBHOOK_SECRET');
}

const DOMAIN_REJECTIONS = new Set(['ENTRIES_CLOSED', 'TOO_EARLY', 'ENTRY_NOT_FOUND']);
const TEST_DATA_ERRORS = new Set(['UNAUTHENTICATED', 'FORBIDDEN', 'DROP_NOT_FOUND', 'NOT_FOUND', 'NOT_A_DRAW']);

const availability = new Rate('sli_availability');
const apiDuration = new Trend('api_duration', true);
const entryDuration = new Trend('entry_duration', true);
const entered = new Counter('entered');          // the client's count of 202 entries
const validEvents = new Counter('valid_events');
const testDataErrors = new Counter('test_data_errors');
const domainRejections = new Counter('business_rejections');
const won = new Counter('won');                  // entries seen WON in the results phase
const waitlisted = new Counter('waitlisted');
const paid = new Counter('paid');
const latePayments = new Counter('late_payments'); // paid after the order expired: REFUND_REQUIRED
const fair = new Rate('results_consistent');     // each result agrees with the revealed seed

export const options = {
  discardResponseBodies: false,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
  scenarios: {
    entries: {
      executor: 'ramping-arrival-rate',
      exec: 'enter',
      startRate: 0,
      timeUnit: '1s',
      startTime: `${OPEN_IN_SECONDS}s`,
      stages: [
        { target: RATE, duration: RAMP },
        { target: RATE, duration: `${DURATION_S}s` },
      ],
      preAllocatedVUs: PRE_VUS,
      maxVUs: MAX_VUS,
    },
    results: {
      executor: 'shared-iterations',
      exec: 'results',
      startTime: `${OPEN_IN_SECONDS + DURATION_S + 2 + ENTRY_GRACE_S + DRAW_WAIT_S}s`,
      vus: RESULT_VUS,
      iterations: PLANNED,
      maxDuration: '120s',
    },
  },
  thresholds: {
    sli_availability: ['rate>=0.999'],
    api_duration: ['p(95)<800', 'p(99)<1500'],
    entry_duration: ['p(95)<800'],
    test_data_errors: ['count==0'],
    results_consistent: ['rate==1'],
    valid_events: ['count>0'],
  },
};

const SELLER = { 'X-User-Id': '1', 'X-User-Role': 'seller', 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': RUN_ID };

function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

export function setup() {
  const product = http.post(`${BASE}/products`, JSON.stringify({ name: 'k6 draw', stockQuantity: LIMITED }), { headers: SELLER });
  check(product, { 'product created': (r) => r.status === 201 });
  const open = Date.now() + OPEN_IN_SECONDS * 1000;
  const drop = http.post(`${BASE}/limited-drops`, JSON.stringify({
    productId: product.json('productId'),
    openAt: iso(open),
    entryCloseAt: iso(open + (DURATION_S + 2 + ENTRY_GRACE_S) * 1000),
    closeAt: iso(open + 3600 * 1000),
    limitedQuantity: LIMITED,
    mode: 'DRAW',
  }), { headers: SELLER });
  check(drop, { 'draw drop created': (r) => r.status === 201 });
  return { dropId: drop.json('dropId'), productId: product.json('productId') };
}

function headers(user) {
  return { 'X-User-Id': String(user), 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': RUN_ID };
}

function field(res, name) {
  try {
    return res.json(name);
  } catch (_) {
    return null;
  }
}

export function enter(data) {
  const user = FIRST_USER + exec.scenario.iterationInTest;
  const res = http.post(`${BASE}/limited-drops/${data.dropId}/entries`, null, {
    headers: headers(user),
    tags: { name: '/limited-drops/{dropId}/entries' },
  });
  const code = res.status >= 400 && res.status < 500 ? field(res, 'code') : null;
  if (res.status === 202) {
    availability.add(true);
    apiDuration.add(res.timings.duration);
    entryDuration.add(res.timings.duration);
    entered.add(1);
    validEvents.add(1);
  } else if (code && DOMAIN_REJECTIONS.has(code)) {
    domainRejections.add(1, { code });
  } else if (code && TEST_DATA_ERRORS.has(code)) {
    testDataErrors.add(1, { code });
  } else {
    // A 200 (a new buyer cannot have entered before), THROTTLED, 5xx, timeouts.
    availability.add(false);
    apiDuration.add(res.timings.duration);
    validEvents.add(1);
  }
}

// The drop view, read once per VU after the draw: the seed and the cutoff every result is
// checked against.
let revealed = null;

export function results(data) {
  if (revealed === null) {
    revealed = http.get(`${BASE}/limited-drops/${data.dropId}`).json();
  }
  const user = FIRST_USER + exec.scenario.iterationInTest;
  const res = http.get(`${BASE}/limited-drops/${data.dropId}/entries/me`, {
    headers: headers(user),
    tags: { name: '/limited-drops/{dropId}/entries/me' },
  });
  if (res.status === 404) {
    return; // k6 dropped this iteration of the entries: no entry, as expected.
  }
  availability.add(res.status === 200);
  apiDuration.add(res.timings.duration);
  validEvents.add(1);
  if (res.status !== 200) {
    return;
  }
  const entry = res.json();
  // The buyer's own check: the rank key is HMAC-SHA256(seed, user id), and it won exactly when
  // it is at most the cutoff.
  const key = crypto.hmac('sha256', hexBytes(revealed.drawSeed), String(user), 'hex');
  const wins = key <= revealed.winningRankCutoff;
  // Drawn winners are exactly the keys up to the cutoff; a promoted winner (a unit given back)
  // and every waitlisted entry are past it.
  const drawnWinner = entry.status === 'WON' && !entry.promoted;
  fair.add(entry.rankKey === key && drawnWinner === wins && (!entry.promoted || !wins));
  if (entry.status === 'WON') {
    won.add(1);
    const pays = ((user * 7919) % 1000) < PAY_SHARE * 1000;
    if (pays) {
      pay(entry.orderId, user);
    }
  } else if (entry.status === 'WAITLISTED') {
    waitlisted.add(1);
  }
}

function pay(orderId, user) {
  const order = http.get(`${BASE}/orders/${orderId}`, { headers: headers(user), tags: { name: '/orders/{orderId}' } });
  const res = paySigned(BASE, WEBHOOK_SECRET, RUN_ID, user, {
    orderId, amountMinor: field(order, 'amountMinor'), currency: field(order, 'currency'),
  });
  const outcome = res.status === 200 ? field(res, 'outcome') : null;
  if (outcome === 'REFUND_REQUIRED') {
    // The order expired before this buyer paid: the service's correct answer to a late payment
    // (a domain outcome, excluded from the SLIs, counted on its own).
    latePayments.add(1);
    return;
  }
  const ok = outcome === 'PAID';
  availability.add(ok);
  apiDuration.add(res.timings.duration);
  validEvents.add(1);
  if (ok) {
    paid.add(1);
  }
}

function hexBytes(hex) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i += 1) {
    bytes[i] = parseInt(hex.substr(i * 2, 2), 16);
  }
  return bytes.buffer;
}

export function teardown(data) {
  const stats = http.get(`${BASE}/limited-drops/${data.dropId}/stats`, { headers: SELLER }).json();
  const view = http.get(`${BASE}/limited-drops/${data.dropId}`).json();
  console.log(`stats ${JSON.stringify(stats)}`);
  console.log(`DRAW_RESULT drop=${data.dropId} entries=${stats.entryCount} winners=${stats.winnerCount} promoted=${stats.promotedCount} sold=${stats.soldQuantity} paid=${stats.paidQuantity} pending=${stats.pendingQuantity} expired=${stats.expiredQuantity} cancelled=${stats.cancelledQuantity} drawn=${view.drawnAt ? 1 : 0}`);
}
