import type { FastifyBaseLogger } from 'fastify';
import { isoTimestamp } from '../core/clock.js';
import type { Services } from '../core/context.js';
import { idleUntil, PassLoop } from '../core/pass-loop.js';
import {
  claimDue,
  mailDomain,
  markFailed,
  markSent,
  MAX_ATTEMPTS,
  type Delivery,
  type EmailContent,
  type WebhookContent,
} from '../resources/notifications/deliveries.js';
import { fanOut } from '../resources/notifications/fanout.js';
import { EVENT_NOTIFICATIONS } from '../resources/notifications/types.js';
import { WEBHOOKS } from '../resources/notifications/webhooks.js';
import type { Mailer } from '../resources/notifications/mail.js';
import { DestinationRefused, postWebhook } from './webhook.js';
import { WAKE_NOTIFY } from '../store/wakes.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's notification worker (src/app.ts); `serve` starts its loop, tests call `runDue()`. */
    notifier: Notifier;
  }
}

/** Deliveries sent at once by one process. */
const CONCURRENCY = 8;

/**
 * The notification worker of one API process: fans out new outbox events (resources/notifications/
 * fanout.ts), then sends due deliveries (resources/notifications/deliveries.ts) by e-mail or webhook,
 * outside any transaction. Its loop runs on real time like the scheduler's (one process of several, src/serve.ts); `runDue()` does one full pass (tests call it after moving the clock). All state is
 * in the database, so stopping or killing the process loses nothing.
 */
export class Notifier {
  private readonly loop = new PassLoop(
    () => this.pass(),
    (err) => this.log?.error({ err }, 'notification pass failed'),
  );

  constructor(
    private readonly s: Services,
    private readonly mailer: Mailer,
    private readonly log?: FastifyBaseLogger,
    /** `webhookTimeoutMs`: a webhook delivery's bound (notify/webhook.ts; tests shorten it). */
    private readonly opts: { webhookTimeoutMs?: number } = {},
  ) {
    // The composition root's subscription: these event types get outbox rows.
    s.events?.subscribe(Object.keys(EVENT_NOTIFICATIONS));
  }

  /** The polling loop; where the store hears wake-ups (store/wakes.ts) an idle one sleeps until new events or deliveries, or the next retry. */
  start(pollMs = 250): void {
    const { store, clock } = this.s;
    const nextDue = () => store.notifications.deliveries.nextDue(store.db);
    this.loop.start(
      pollMs,
      idleUntil(store.wakes, [WAKE_NOTIFY], nextDue, () => clock.now().getTime()),
    );
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: every pending event fanned out, every due delivery attempted. Returns deliveries attempted. */
  runDue(): Promise<number> {
    return this.loop.runDue();
  }

  private async pass(): Promise<number> {
    const domain = mailDomain(this.s.config.mailFrom);
    while ((await fanOut(this.s, domain)) > 0 && !this.loop.stopped);
    let attempted = 0;
    for (;;) {
      const due = await claimDue(this.s, CONCURRENCY);
      if (!due.length) return attempted;
      await Promise.all(due.map((d) => this.attempt(d)));
      attempted += due.length;
      if (this.loop.stopped) return attempted;
    }
  }

  private async attempt(d: Delivery): Promise<void> {
    let error: string | null = null;
    // What the log gets beyond the user's message: the network error behind "could not be reached".
    let cause: unknown;
    try {
      if (d.channel === 'email') {
        const c = JSON.parse(d.content) as EmailContent;
        await this.mailer.send({ to: d.address, subject: c.subject, text: c.text, html: c.html, messageId: d.message_id });
      } else {
        const hook = await this.s.store.resources.get(this.s.store.db, WEBHOOKS, d.target_uuid);
        // The webhook is gone: nothing to retry.
        if (!hook) d.attempts = MAX_ATTEMPTS;
        if (!hook) error = 'webhook deleted';
        else
          await postWebhook(
            d.address,
            String(hook.body.secret),
            (JSON.parse(d.content) as WebhookContent).body,
            d.message_id,
            Math.floor(this.s.clock.now().getTime() / 1000),
            { allowPrivate: this.s.config.webhooksAllowPrivate, resolve: this.s.resolve, timeoutMs: this.opts.webhookTimeoutMs },
          );
      }
    } catch (err) {
      error = (err as Error).message || String(err);
      cause = (err as Error).cause;
      // A destination that is not allowed stays so: no retries.
      if (err instanceof DestinationRefused) d.attempts = MAX_ATTEMPTS;
    }
    await this.s.store.transaction(async (tx) => {
      const outcome = error === null ? (await markSent(tx, this.s, d.id), 'ok') : await markFailed(tx, this.s, d, error);
      if (d.channel === 'webhook' && error !== 'webhook deleted')
        await this.s.store.resources.patch(tx, this.s.clock.now(), WEBHOOKS, d.target_uuid, (body) => ({
          ...body,
          last_status: outcome === 'ok' ? 'ok' : 'failing',
          last_error: error,
          last_delivery_at: isoTimestamp(this.s.clock.now()),
        }));
    });
    if (error !== null) this.log?.warn({ delivery: d.id, channel: d.channel, attempts: d.attempts, error, err: cause }, 'notification delivery failed');
  }
}
