// The payment provider's side, for the scenarios that pay: a `payment.succeeded` event for an
// order, signed as the provider signs it (HMAC-SHA256 over `timestamp.body` with the server's
// PAYMENT_WEBHOOK_SECRET) and sent to POST /payments/events. Returns the response; the caller
// classifies it.
import http from 'k6/http';
import crypto from 'k6/crypto';

export function paySigned(base, secret, runId, user, order) {
  const event = JSON.stringify({
    eventId: `evt-${runId}-${user}`,
    type: 'payment.succeeded',
    orderId: order.orderId,
    amountMinor: order.amountMinor,
    currency: order.currency,
    paymentReference: `pi-${user}`,
  });
  const t = Math.floor(Date.now() / 1000);
  const signature = crypto.hmac('sha256', secret, `${t}.${event}`, 'hex');
  return http.post(`${base}/payments/events`, event, {
    headers: { 'Payment-Signature': `t=${t},v1=${signature}`, 'Content-Type': 'application/json', 'X-Load-Test-Run-Id': runId },
    tags: { name: '/payments/events' },
  });
}
