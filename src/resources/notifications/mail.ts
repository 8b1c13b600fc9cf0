/**
 * How mail leaves, as the services see it: an injected `Mailer` (notify/mailer.ts implements it over SMTP
 * or an outbox folder). Declared here, below the machinery, so a service that sends mail (sign-up) never
 * imports the machinery.
 */

/** One e-mail: plain text, optionally with an HTML alternative and a fixed Message-ID (retries repeat it). */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
  messageId?: string;
}

/** Where a message went: handed to the SMTP server, or written to a file in the outbox folder. */
export type MailDelivery = { via: 'smtp'; messageId: string } | { via: 'outbox'; file: string };

/** E-mail delivery, injected so services never know how mail leaves. */
export interface Mailer {
  /** `smtp` or `outbox`: lets a caller decide whether to log what a local user needs (a sign-up link). */
  readonly kind: 'smtp' | 'outbox';
  send(msg: MailMessage): Promise<MailDelivery>;
  close(): void;
}
