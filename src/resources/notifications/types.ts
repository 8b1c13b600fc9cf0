/**
 * The notification vocabulary (reference §17) and the one table that says which recorded event becomes
 * which notification. Events are `<category>.<action>` (core/events.ts); producers are billing,
 * subscriptions and accounts. Types without a producer yet (drives_delete*, trial_expire*, payment_*
 * besides `payment`, random_upgrade) are mapped so a future producer only has to record the event.
 */
export const NOTIFICATION_TYPES = [
  'drives_delete',
  'drives_delete_soon',
  'new_account',
  'out_of_money_soon',
  'out_of_money_very_soon',
  'payment',
  'payment_approved',
  'payment_cancelled',
  'payment_failed',
  'payment_withheld',
  'random_upgrade',
  'reset_password',
  'stop_servers',
  'subscription_expire',
  'subscription_expire_soon',
  'subscription_expire_very_soon',
  'subscription_renewal_failure',
  'subscription_renewal_soon',
  'subscription_renewal_success',
  'subscription_renewal_very_soon',
  'trial_expire',
  'trial_expire_soon',
] as const;
export type NotificationType = (typeof NOTIFICATION_TYPES)[number];

export const MEDIA = ['email', 'api'] as const;
export type Medium = (typeof MEDIA)[number];

/** A preference nobody set: every contact gets every type on every medium until told otherwise. */
export const DEFAULT_PREFERENCE = true;

export const isNotificationType = (t: unknown): t is NotificationType => typeof t === 'string' && (NOTIFICATION_TYPES as readonly string[]).includes(t);
export const isMedium = (m: unknown): m is Medium => typeof m === 'string' && (MEDIA as readonly string[]).includes(m);

const SUBSCRIPTION_ACTIONS = ['expire', 'expire_soon', 'expire_very_soon', 'renewal_soon', 'renewal_very_soon', 'renewal_success', 'renewal_failure'] as const;
const BILLING_ACTIONS = [
  'out_of_money_soon',
  'out_of_money_very_soon',
  'stop_servers',
  'payment',
  'payment_approved',
  'payment_cancelled',
  'payment_failed',
  'payment_withheld',
  'drives_delete_soon',
  'drives_delete',
] as const;
const ACCOUNT_ACTIONS = ['new_account', 'reset_password', 'trial_expire', 'trial_expire_soon', 'random_upgrade'] as const;

/** Event type -> notification type. */
export const EVENT_NOTIFICATIONS: Readonly<Record<string, NotificationType>> = Object.freeze({
  ...Object.fromEntries(BILLING_ACTIONS.map((a) => [`billing.${a}`, a])),
  ...Object.fromEntries(SUBSCRIPTION_ACTIONS.map((a) => [`subscriptions.${a}`, `subscription_${a}` as NotificationType])),
  ...Object.fromEntries(ACCOUNT_ACTIONS.map((a) => [`accounts.${a}`, a])),
});

/**
 * Types whose text carries a secret (the password-reset link): sent by e-mail to the account's own
 * address only, never to other contacts, the feed or webhooks.
 */
export const ACCOUNT_ONLY: ReadonlySet<NotificationType> = new Set(['reset_password']);

/** Subject lines; the event's `details` is the body's first paragraph. */
export const SUBJECTS: Record<NotificationType, string> = {
  drives_delete: 'Drives of your account were deleted',
  drives_delete_soon: 'Drives of your account will be deleted soon',
  new_account: 'Welcome to Stratus',
  out_of_money_soon: 'Your balance will run out soon',
  out_of_money_very_soon: 'Your balance will run out very soon',
  payment: 'Payment received',
  payment_approved: 'Payment approved',
  payment_cancelled: 'Payment cancelled',
  payment_failed: 'Payment failed',
  payment_withheld: 'Payment withheld',
  random_upgrade: 'Your account was upgraded',
  reset_password: 'Reset your Stratus password',
  stop_servers: 'Your servers were stopped',
  subscription_expire: 'A subscription expired',
  subscription_expire_soon: 'A subscription expires soon',
  subscription_expire_very_soon: 'A subscription expires very soon',
  subscription_renewal_failure: 'A subscription could not be renewed',
  subscription_renewal_soon: 'A subscription will be renewed soon',
  subscription_renewal_success: 'A subscription was renewed',
  subscription_renewal_very_soon: 'A subscription will be renewed very soon',
  trial_expire: 'Your trial has ended',
  trial_expire_soon: 'Your trial ends soon',
};
