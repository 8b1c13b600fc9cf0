import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type * as Nodemailer from 'nodemailer';
import type { Transporter } from 'nodemailer';
import type { Clock } from '../core/clock.js';
import { lazyPackage } from '../core/lazy.js';
import type { MailDelivery as Delivery, Mailer, MailMessage } from '../resources/notifications/mail.js';

/** nodemailer, loaded when the first message is sent (core/lazy.ts). */
const loadNodemailer = lazyPackage<typeof Nodemailer>('nodemailer');

/** What nodemailer is given for a message. */
const composed = (from: string, msg: MailMessage) => ({
  from,
  to: msg.to,
  subject: msg.subject,
  text: msg.text,
  ...(msg.html ? { html: msg.html } : {}),
  ...(msg.messageId ? { messageId: msg.messageId } : {}),
});

export interface MailerConfig {
  smtpUrl: string | null;
  outbox: string;
  mailFrom: string;
}

/** SMTP through nodemailer when a server is configured (`smtp://user:pass@host:587`, `smtps://…`). */
class SmtpMailer implements Mailer {
  readonly kind = 'smtp';
  private transport: Transporter | undefined;

  constructor(
    private readonly url: string,
    private readonly from: string,
  ) {}

  async send(msg: MailMessage): Promise<Delivery> {
    // Bounded waits: a request that sends mail must not hang on an unreachable server for minutes.
    // Pooled: notifications go out in bursts (a billing run), and a new connection per message caps delivery near 40/s.
    this.transport ??= loadNodemailer().createTransport({
      url: this.url,
      pool: true,
      maxConnections: 4,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
    const info = await this.transport.sendMail(composed(this.from, msg));
    return { via: 'smtp', messageId: String(info.messageId) };
  }

  close(): void {
    this.transport?.close();
  }
}

/**
 * No SMTP server: each message is composed exactly as it would be sent and written to the outbox folder
 * as an `.eml` file (any mail client opens it), so a user running Stratus locally can still read it.
 */
class OutboxMailer implements Mailer {
  readonly kind = 'outbox';
  private transport: Transporter | undefined;
  private readonly dir: string;

  constructor(
    dir: string,
    private readonly from: string,
    private readonly clock: Clock,
  ) {
    this.dir = resolve(dir);
  }

  async send(msg: MailMessage): Promise<Delivery> {
    this.transport ??= loadNodemailer().createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
    const info = await this.transport.sendMail(composed(this.from, msg));
    mkdirSync(this.dir, { recursive: true });
    const stamp = this.clock.now().toISOString().replace(/[:.]/g, '-');
    const file = join(this.dir, `${stamp}-${randomBytes(4).toString('hex')}.eml`);
    writeFileSync(file, info.message as Buffer, { mode: 0o600 });
    return { via: 'outbox', file };
  }

  close(): void {
    this.transport?.close();
  }
}

export function createMailer(config: MailerConfig, clock: Clock): Mailer {
  return config.smtpUrl ? new SmtpMailer(config.smtpUrl, config.mailFrom) : new OutboxMailer(config.outbox, config.mailFrom, clock);
}
