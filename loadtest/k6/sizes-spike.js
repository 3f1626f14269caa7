// A drop in 10 sizes at its opening: a spike of buyers who pick sizes with a skew (the popular
// sizes first, a fixed table), each size sold out on its own, classified as SLIs (the load-test
// method note) by the body's `code`: good / bad / domain rejection / input error / test-data
// error. A refusal of a sold-out size must name that size.
//
//   k6 run -e BASE=http://127.0.0.1:8080 -e RATE=2000 -e DURATION=10s -e LIMITED=1000 loadtest/k6/sizes-spike.js
//
// Each size has its share of LIMITED by the same table the buyers choose by, so every size sells
// out when the buyers outnumber the units. The client's 202s are counted per size (`accepted`
// tagged with the sku); loadtest/sizes-spike.sh compares them with each size's units sold.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { DOMAIN_REJECTIONS, INPUT_ERRORS, TEST_DATA_ERRORS, safeField } from './lib/sli.js';

const BASE = __ENV.BASE || 'http://127.0.0.1:8080';
const RATE = Number(__ENV.RATE || 1000);
const DURATION = __ENV.DURATION || '15s';
const RAMP = __ENV.RAMP || '2s';
const PRE_VUS = Number(__ENV.PRE_VUS || Math.min(RATE, 1000));
const MAX_VUS = Number(__ENV.MAX_VUS || Math.min(RATE * 2, 3000));
const LIMITED = Number(__ENV.LIMITED || 1000);
const OPEN_IN_SECONDS = Number(__ENV.OPEN_IN || 2);
const RUN_ID = __ENV.RUN_ID || `sizes-spike-${Date.now()}`;

// The sizes and the buyers' skew, in percent (the popular sizes first; sums to 100).
export const SIZES = [
  ['US-9', 20], ['US-10', 18], ['US-8', 14], ['US-11', 12], ['US-9.5', 10],
  ['US-10.5', 8], ['US-8.5', 7], ['US-12', 5], ['US-7', 4], ['US-13', 2],
];
const UNITS = SIZES.map(([sku, share]) => [sku, Math.max(1, Math.floor((LIMITED * share) / 100))]);
const TOTAL = UNITS.reduce((sum, [, n]) => sum + n, 0);

const availability = new Rate('sli_availability');
const apiDuration = new Trend('api_duration', true);
const rejectionDuration = new Trend('rejection_duration', true);
const domainRejections = new Counter('business_rejections');
const inputErrors = new Counter('input_errors');
const testDataErrors = new Counter('test_data_errors');
const wrongSize = new Counter('sold_out_of_another_size');
const consistency = new Rate('consistency');
const accepted = new Counter('accepted');
const acceptedDuration = new Trend('accepted_duration', true);
const validEvents = new Counter('valid_events');

// A threshold per size makes k6 report that size's 202s in its summary.
const perSize = Object.fromEntries(SIZES.map(([sku]) => [`accepted{sku:${sku}}`, ['count>=0']]));

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
  thresholds: Object.assign({
    sli_availability: ['rate>=0.999'],
    api_duration: ['p(95)<800', 'p(99)<1500'],
    accepted_duration: ['p(95)<800'],
    rejection_duration: ['p(95)<200'],
    test_data_errors: ['count==0'],
    input_errors: ['count==0'],
    sold_out_of_another_size: ['count==0'],
    consistency: ['rate==1'],
    valid_events: ['count>0'],
  }, perSize),
};

const SELLER = { 'X-User-Id': '1', 'X-User-Role': 'seller', 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': RUN_ID };

export function setup() {
  const variants = UNITS.map(([sku, n]) => ({ sku, label: sku.replace('-', ' '), stockQuantity: n }));
  const product = http.post(`${BASE}/products`, JSON.stringify({ name: 'k6 sizes', variants }), { headers: SELLER });
  check(product, { 'product created': (r) => r.status === 201 });
  const openAt = new Date(Date.now() + OPEN_IN_SECONDS * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const closeAt = new Date(Date.now() + 3600 * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const drop = http.post(`${BASE}/limited-drops`, JSON.stringify({
    productId: product.json('productId'), openAt, closeAt,
    variants: UNITS.map(([sku, n]) => ({ sku, limitedQuantity: n })), perUserLimit: 1,
  }), { headers: SELLER });
  check(drop, { 'drop created': (r) => r.status === 201 });
  return { dropId: drop.json('dropId'), productId: product.json('productId') };
}

// A 32-bit mix of the buyer id (the murmur3 finalizer's steps), so consecutive ids spread evenly.
function mix(x) {
  let h = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return (h ^ (h >>> 16)) >>> 0;
}

// The size of the buyer's choice: the table's cumulative shares over a hash of the buyer.
function sizeOf(user) {
  const point = mix(user) % 100;
  let edge = 0;
  for (const [sku, share] of SIZES) {
    edge += share;
    if (point < edge) {
      return sku;
    }
  }
  return SIZES[0][0];
}

export default function (data) {
  const user = 1000000 + (__VU * 100000) + __ITER;
  const sku = sizeOf(user);
  const res = http.post(`${BASE}/limited-drops/${data.dropId}/orders`, JSON.stringify({ quantity: 1, sku }), {
    headers: {
      'X-User-Id': String(user),
      'Idempotency-Key': `k6-${RUN_ID}-${user}`,
      'Content-Type': 'application/json',
      'X-Load-Test-Run-Id': RUN_ID,
    },
    tags: { name: '/limited-drops/{dropId}/orders' },
  });
  const code = res.status >= 400 && res.status < 500 ? safeField(res, 'code') : null;
  if (res.status === 202) {
    availability.add(true);
    apiDuration.add(res.timings.duration);
    accepted.add(1, { sku });
    acceptedDuration.add(res.timings.duration);
    validEvents.add(1);
    return;
  }
  if (code === 'SOLD_OUT' && safeField(res, 'sku') !== sku) {
    wrongSize.add(1);
  }
  if (code && DOMAIN_REJECTIONS.has(code)) {
    domainRejections.add(1, { code });
    rejectionDuration.add(res.timings.duration);
  } else if (code && INPUT_ERRORS.has(code)) {
    inputErrors.add(1, { code });
  } else if (code && TEST_DATA_ERRORS.has(code)) {
    testDataErrors.add(1, { code });
  } else {
    availability.add(false);
    apiDuration.add(res.timings.duration);
    validEvents.add(1);
  }
}

export function teardown(data) {
  const recon = http.get(`${BASE}/limited-drops/${data.dropId}/reconciliation`, { headers: SELLER }).json();
  const stats = http.get(`${BASE}/limited-drops/${data.dropId}/stats`, { headers: SELLER }).json();
  const product = http.get(`${BASE}/products/${data.productId}`, { headers: SELLER }).json();
  consistency.add(recon.oversold === false, { check: 'not oversold' });
  consistency.add(recon.limitedQuantity === TOTAL, { check: 'the drop is its sizes' });
  for (const size of recon.variants) {
    consistency.add(size.oversold === false && size.soldQuantity <= size.limitedQuantity, { check: 'size within its limit' });
    const variant = product.variants.find((v) => v.sku === size.sku);
    consistency.add(variant.stockQuantity + size.soldQuantity === size.limitedQuantity, { check: 'size stock + sold constant' });
    // loadtest/sizes-spike.sh reads these to compare with the client's 202s of each size.
    console.log(`SIZE_RESULT sku=${size.sku} sold=${size.soldQuantity} limited=${size.limitedQuantity}`);
  }
  console.log(`DROP_RESULT sold=${recon.soldQuantity} limited=${recon.limitedQuantity} success=${stats.successCount} drop=${data.dropId}`);
}
