// The load-test method note's outcome classes, by the body's `code` (not the status alone: 409
// is both SOLD_OUT and busy), exactly as docs/observability.md's "Outcome classes" table says
// (tests/observability.rs compares these sets with it). Good is a 202; bad is THROTTLED,
// SERVICE_UNAVAILABLE, INTERNAL, a timeout or anything unclassified.
export const DOMAIN_REJECTIONS = new Set([
  'TOO_EARLY', 'SOLD_OUT', 'CLOSED', 'DROP_PAUSED', 'DRAW_DROP', 'PER_USER_LIMIT_EXCEEDED',
  'ORDER_LIMIT_REACHED', 'IDEMPOTENCY_KEY_IN_PROGRESS', 'RATE_LIMITED',
]);
export const INPUT_ERRORS = new Set([
  'UNSUPPORTED_MEDIA_TYPE', 'MALFORMED_REQUEST', 'VALIDATION_FAILED', 'IDEMPOTENCY_KEY_REQUIRED',
  'IDEMPOTENCY_KEY_REUSED',
]);
export const TEST_DATA_ERRORS = new Set(['UNAUTHENTICATED', 'FORBIDDEN', 'DROP_NOT_FOUND']);

export function safeField(res, name) {
  try {
    return res.json(name);
  } catch (_) {
    return null;
  }
}
