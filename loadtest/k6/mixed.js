// Reads under a write spike, the load-test method note's mixed scenario: the drop view
// (GET /limited-drops/{id}) read at READ_RATE per second, first alone (the control, CONTROL_S
// seconds), then while a purchase spike of PURCHASE_RATE per second runs on the same drop (the
// treatment, SPIKE_S seconds). Read latency is reported per phase (read_duration{phase:control},
// read_duration{phase:treatment}) against the note's read targets (p95 < 1 s, p99 < 2.5 s), and
// the treatment's p95 and p99 are printed against the control's.
//
// Each purchase is a buyer's journey: view the drop, buy, and (PAY_SHARE of those who got a
// unit) pay by the provider's signed event. journey_completed is the share of journeys that got
// a unit and then completed every step (view 200, buy 202, pay PAID); the note's threshold for a
// critical user journey is 97%.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e READ_RATE=500 -e PURCHASE_RATE=3000 -e LIMITED=1000 \
//     -e PAY_SHARE=0.5 -e WEBHOOK_SECRET=... loadtest/k6/mixed.js
//
// Purchases are classified by docs/observability.md's outcome table (as drop-spike.js); the
// server must trust identity headers (AUTH_MODE=trusted-header) and have the same
// PAYMENT_WEBHOOK_SECRET. Loopback only; it stops by itself after CONTROL_S + SPIKE_S.
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { paySigned } from './lib/payment.js';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const READ_RATE = Number(__ENV.READ_RATE || 500);
const PURCHASE_RATE = Number(__ENV.PURCHASE_RATE || 2000);
const CONTROL_S = Number(__ENV.CONTROL_S || 10);
const SPIKE_S = Number(__ENV.SPIKE_S || 10);
const LIMITED = Number(__ENV.LIMITED || 1000);
const PAY_SHARE = Number(__ENV.PAY_SHARE || 0.5);
const WEBHOOK_SECRET = __ENV.WEBHOOK_SECRET || '';
const RUN_ID = __ENV.RUN_ID || `mixed-${Date.now()}`;
if (PAY_SHARE > 0 && !WEBHOOK_SECRET) {
  throw new Error('PAY_SHARE needs WEBHOOK_SECRET: the PAYMENT_WEBHOOK_SECRET the server has');
}

const DOMAIN_REJECTIONS = new Set([
  'TOO_EARLY', 'SOLD_OUT', 'CLOSED', 'DROP_PAUSED', 'DRAW_DROP', 'PER_USER_LIMIT_EXCEEDED',
  'ORDER_LIMIT_REACHED', 'IDEMPOTENCY_KEY_IN_PROGRESS', 'RATE_LIMITED',
]);
const TEST_DATA_ERRORS = new Set(['UNAUTHENTICATED', 'FORBIDDEN', 'DROP_NOT_FOUND']);

const readDuration = new Trend('read_duration', true);
const readAvailability = new Rate('read_availability');
const writeDuration = new Trend('write_duration', true); // valid purchase and payment events
const availability = new Rate('sli_availability');
const journeys = new Rate('journey_completed');
const testDataErrors = new Counter('test_data_errors');
const domainRejections = new Counter('business_rejections');

export const options = {
  discardResponseBodies: false,
  summaryTrendStats: ['avg', 'med', 'p(95)', 'p(99)', 'max'],
  scenarios: {
    reads_control: {
      executor: 'constant-arrival-rate',
      exec: 'read',
      rate: READ_RATE,
      timeUnit: '1s',
      duration: `${CONTROL_S}s`,
      preAllocatedVUs: Math.min(READ_RATE, 200),
      maxVUs: Math.min(READ_RATE * 2, 1000),
      tags: { phase: 'control' },
    },
    reads_treatment: {
      executor: 'constant-arrival-rate',
      exec: 'read',
      rate: READ_RATE,
      timeUnit: '1s',
      startTime: `${CONTROL_S}s`,
      duration: `${SPIKE_S}s`,
      preAllocatedVUs: Math.min(READ_RATE, 200),
      maxVUs: Math.min(READ_RATE * 2, 1000),
      tags: { phase: 'treatment' },
    },
    purchases: {
      executor: 'constant-arrival-rate',
      exec: 'journey',
      rate: PURCHASE_RATE,
      timeUnit: '1s',
      startTime: `${CONTROL_S}s`,
      duration: `${SPIKE_S}s`,
      preAllocatedVUs: Math.min(PURCHASE_RATE, 1000),
      maxVUs: Math.min(PURCHASE_RATE * 2, 3000),
      tags: { phase: 'treatment' },
    },
  },
  thresholds: {
    'read_duration{phase:control}': ['p(95)<1000', 'p(99)<2500'],
    'read_duration{phase:treatment}': ['p(95)<1000', 'p(99)<2500'],
    read_availability: ['rate>=0.999'],
    write_duration: ['p(95)<1500', 'p(99)<3000'],
    sli_availability: ['rate>=0.999'],
    journey_completed: ['rate>=0.97'],
    test_data_errors: ['count==0'],
  },
};

const SELLER = { 'X-User-Id': '1', 'X-User-Role': 'seller', 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': RUN_ID };

function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

export function setup() {
  const product = http.post(`${BASE}/products`, JSON.stringify({ name: 'k6 mixed', stockQuantity: LIMITED }), { headers: SELLER });
  check(product, { 'product created': (r) => r.status === 201 });
  // Open when the spike starts; readable (and read) before.
  const drop = http.post(`${BASE}/limited-drops`, JSON.stringify({
    productId: product.json('productId'),
    openAt: iso(Date.now() + CONTROL_S * 1000),
    closeAt: iso(Date.now() + 3600 * 1000),
    limitedQuantity: LIMITED,
    perUserLimit: 1,
  }), { headers: SELLER });
  check(drop, { 'drop created': (r) => r.status === 201 });
  return { dropId: drop.json('dropId') };
}

function field(res, name) {
  try {
    return res.json(name);
  } catch (_) {
    return null;
  }
}

function view(data, tags) {
  const res = http.get(`${BASE}/limited-drops/${data.dropId}`, {
    headers: { 'X-Load-Test-Run-Id': RUN_ID },
    tags: Object.assign({ name: '/limited-drops/{dropId}' }, tags),
  });
  readAvailability.add(res.status === 200, tags);
  readDuration.add(res.timings.duration, tags);
  return res.status === 200;
}

export function read(data) {
  view(data, { phase: exec.scenario.name === 'reads_control' ? 'control' : 'treatment' });
}

export function journey(data) {
  const user = 3000000 + exec.scenario.iterationInTest;
  const viewed = view(data, { phase: 'treatment', step: 'journey' });
  const res = http.post(`${BASE}/limited-drops/${data.dropId}/orders`, JSON.stringify({ quantity: 1 }), {
    headers: {
      'X-User-Id': String(user),
      'Idempotency-Key': `k6-${RUN_ID}-${user}`,
      'Content-Type': 'application/json',
      'X-Load-Test-Run-Id': RUN_ID,
    },
    tags: { name: '/limited-drops/{dropId}/orders' },
  });
  const code = res.status >= 400 && res.status < 500 ? field(res, 'code') : null;
  if (res.status !== 202) {
    if (code && DOMAIN_REJECTIONS.has(code)) {
      domainRejections.add(1, { code });
    } else if (code && TEST_DATA_ERRORS.has(code)) {
      testDataErrors.add(1, { code });
    } else {
      availability.add(false);
      writeDuration.add(res.timings.duration);
      // A bad answer ends the journey of a buyer who might have got a unit.
      journeys.add(false);
    }
    return;
  }
  availability.add(true);
  writeDuration.add(res.timings.duration);
  if (((user * 7919) % 1000) >= PAY_SHARE * 1000) {
    return; // This winner does not pay: not a journey to complete.
  }
  const pay = paySigned(BASE, WEBHOOK_SECRET, RUN_ID, user, {
    orderId: res.json('orderId'), amountMinor: res.json('amountMinor'), currency: res.json('currency'),
  });
  const paid = pay.status === 200 && field(pay, 'outcome') === 'PAID';
  availability.add(paid);
  writeDuration.add(pay.timings.duration);
  journeys.add(viewed && paid);
}

export function handleSummary(summary) {
  const m = summary.metrics;
  const p = (name, q) => (m[name] ? m[name].values[q] : NaN);
  const control = [p('read_duration{phase:control}', 'p(95)'), p('read_duration{phase:control}', 'p(99)')];
  const treatment = [p('read_duration{phase:treatment}', 'p(95)'), p('read_duration{phase:treatment}', 'p(99)')];
  const line = `MIXED_RESULT read_p95_ms control=${control[0].toFixed(2)} treatment=${treatment[0].toFixed(2)} `
    + `read_p99_ms control=${control[1].toFixed(2)} treatment=${treatment[1].toFixed(2)} `
    + `journey_completed=${m.journey_completed ? (m.journey_completed.values.rate * 100).toFixed(2) : 'n/a'}% `
    + `journeys=${m.journey_completed ? m.journey_completed.values.passes + m.journey_completed.values.fails : 0}\n`;
  return { stdout: line, 'summary.json': JSON.stringify(summary) };
}
