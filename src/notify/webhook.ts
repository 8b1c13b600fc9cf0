import { createHmac } from 'node:crypto';

/** Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the webhook's secret>`. */
export const SIGNATURE_HEADER = 'X-Stratus-Signature';
/** The delivery's stable id: the same on every retry of one delivery, so a receiver can drop repeats. */
export const DELIVERY_HEADER = 'X-Stratus-Delivery';

export function signature(secret: string, timestampS: number, body: string): string {
  return `t=${timestampS},v1=${createHmac('sha256', secret).update(`${timestampS}.${body}`).digest('hex')}`;
}

/** Bounded wait: a receiver that never answers costs one attempt, not a stuck worker. */
const TIMEOUT_MS = 10_000;

/**
 * POSTs a signed body. Any 2xx is success; anything else (status, refused connection, timeout) throws
 * with a short reason that the user sees as the webhook's last error.
 */
export async function postWebhook(url: string, secret: string, body: string, deliveryId: string, nowS: number): Promise<void> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Stratus-Webhook/1',
        [SIGNATURE_HEADER]: signature(secret, nowS, body),
        [DELIVERY_HEADER]: deliveryId,
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`request failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`, { cause: err });
  }
  await res.arrayBuffer().catch(() => undefined);
  if (res.status < 200 || res.status > 299) throw new Error(`receiver answered HTTP ${res.status}`);
}
