import { createHmac } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Resolver } from '../core/context.js';
import { checkWebhookUrl, isPublicAddress, PRIVATE_DESTINATION } from '../resources/notifications/destinations.js';

/** Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the webhook's secret>`. */
export const SIGNATURE_HEADER = 'X-Stratus-Signature';
/** The delivery's stable id: the same on every retry of one delivery, so a receiver can drop repeats. */
export const DELIVERY_HEADER = 'X-Stratus-Delivery';

export function signature(secret: string, timestampS: number, body: string): string {
  return `t=${timestampS},v1=${createHmac('sha256', secret).update(`${timestampS}.${body}`).digest('hex')}`;
}

/** Bounded wait: a receiver that never answers costs one attempt, not a stuck worker. */
export const WEBHOOK_TIMEOUT_MS = 10_000;

/**
 * What the user sees of any failure below HTTP. One message for refused, reset, unreachable, timed out, TLS
 * and non-HTTP answers alike: telling them apart would make webhooks a port scanner. The log keeps the cause.
 */
export const UNREACHABLE = 'the endpoint could not be reached';
export const NOT_ALLOWED = 'destination not allowed: it resolves to a private, loopback or link-local address';

/** A delivery to a destination that is not allowed: permanent, retrying cannot change it. */
export class DestinationRefused extends Error {
  constructor(message = NOT_ALLOWED) {
    super(message);
  }
}

const systemResolver: Resolver = (host) => dnsLookup(host, { all: true });

/**
 * The connection's own DNS lookup, refusing a name with any non-public address: the address checked is the
 * address connected to, so a name cannot pass a check and then resolve elsewhere (DNS rebinding).
 */
function guardedLookup(resolve: Resolver, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (all) => {
        const found = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
        if (!found.length) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
        if (!allowPrivate && found.some((a) => !isPublicAddress(a.address))) return callback(new DestinationRefused(), '');
        if (options.all) callback(null, found);
        else callback(null, found[0].address, found[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

export interface WebhookOptions {
  /** `--webhooks-allow-private`: local development may send to loopback and private addresses. */
  allowPrivate: boolean;
  /** DNS for the delivery (tests map names); the system's resolver when absent. */
  resolve?: Resolver;
  /** How long a delivery may take, connection to answer (WEBHOOK_TIMEOUT_MS when absent; tests shorten it). */
  timeoutMs?: number;
}

/**
 * POSTs a signed body. Any 2xx is success. Anything else throws: `DestinationRefused` for a destination that
 * is not allowed, else an Error whose message the user sees as the webhook's last error (`HTTP <status>`, or
 * the one UNREACHABLE message with the network error kept as its cause, for the log).
 */
export async function postWebhook(url: string, secret: string, body: string, deliveryId: string, nowS: number, opts: WebhookOptions): Promise<void> {
  // The text again: the webhook may predate the create-time check, and a literal address is connected to without a lookup.
  const checked = checkWebhookUrl(url, opts.allowPrivate);
  if ('refused' in checked) throw new DestinationRefused(checked.refused === PRIVATE_DESTINATION ? NOT_ALLOWED : `destination not allowed: ${checked.refused}`);
  const target = checked.url;
  const status = await new Promise<number>((resolve, reject) => {
    const req = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'user-agent': 'Stratus-Webhook/1',
        [SIGNATURE_HEADER]: signature(secret, nowS, body),
        [DELIVERY_HEADER]: deliveryId,
      },
      // A connection of its own: a pooled socket would skip the lookup, and redirects are never followed.
      agent: false,
      lookup: guardedLookup(opts.resolve ?? systemResolver, opts.allowPrivate),
      signal: AbortSignal.timeout(opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS),
    });
    req.on('response', (res) => {
      // The status is all that counts; the rest of the answer is read and dropped (an abort later is harmless).
      res.on('error', () => {});
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (err) => reject(err instanceof DestinationRefused ? err : new Error(UNREACHABLE, { cause: err })));
    req.end(body);
  });
  if (status < 200 || status > 299) throw new Error(`receiver answered HTTP ${status}`);
}
