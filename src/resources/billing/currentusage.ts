import Type from 'typebox';
import { accountOf } from '../../billing/accounts.js';
import { STOCK_FILTERS } from './balance.js';
import { measure } from '../../billing/engine.js';
import { CYCLE_MS, cycleOf } from '../../billing/cycle.js';
import { ledgerAmount } from '../../billing/money.js';
import { subscribedAt } from '../../billing/subscription-cover.js';
import { f } from '../../core/fields.js';
import type { Meter } from '../../core/metering.js';
import type { SingletonDecl } from '../../core/resource.js';

/**
 * `GET /currentusage/` (reference §16.6): what the caller uses now per usage key (cpu in MHz, memory and
 * storage in bytes, IPs and VLANs as counts), what subscriptions cover, and the part beyond them billed at
 * burst prices; with the balance. Keys: every priced resource plus `amd_cpu`/`amd_mem`, and any key in use.
 * A server counts from the moment it is started. Measured by the same meters the billing poll uses.
 *
 * Traffic (`tx`) is billed by volume each cycle, so its `using` is the bytes sent in the current cycle so
 * far (since its start, the last poll), `subscribed` what is left of the traffic subscriptions in force,
 * and `burst` the part the poll that ends the cycle will charge — the same reading of each key: what the
 * next ledger entry will be made of.
 */
export function currentUsage(meters: () => readonly Meter[]): SingletonDecl {
  return {
    shape: 'singleton',
    kind: 'currentusage',
    flavour: 'custom',
    fields: {
      balance: f.dict({ required: true, output: Type.Object({ balance: Type.String(), currency: Type.String() }) }),
      usage: f.dict({
        required: true,
        output: Type.Record(Type.String(), Type.Object({ burst: Type.Integer(), subscribed: Type.Integer(), using: Type.Integer() })),
      }),
    },
    defaultLimit: 20,
    listMethods: ['get'],
    detailMethods: ['get'],
    wire: { advertised: STOCK_FILTERS },
    service: {
      async get(ctx) {
        const owner = ctx.caller.uuid;
        const at = ctx.clock.now();
        const [used, account, subs] = await ctx.store.snapshot(
          async (db) =>
            [
              await measure(ctx, db, meters(), at, owner, new Date(cycleOf(at) * CYCLE_MS)),
              await accountOf(db, ctx, owner),
              await subscribedAt(db, ctx, at, owner),
            ] as const,
        );
        const subscribed = subs.get(owner) ?? new Map<string, number>();
        const using = new Map<string, number>();
        for (const key of [...ctx.config.pricing.resources, 'amd_cpu', 'amd_mem', ...subscribed.keys()]) using.set(key, 0);
        for (const u of used) for (const key of u.keys) using.set(key, (using.get(key) ?? 0) + u.amount);
        const usage: Record<string, unknown> = {};
        for (const key of [...using.keys()].sort()) {
          const have = subscribed.get(key) ?? 0;
          const now = using.get(key)!;
          usage[key] = { burst: Math.max(0, now - have), subscribed: have, using: now };
        }
        return { balance: { balance: ledgerAmount(account.balance), currency: account.currency }, usage };
      },
    },
  };
}
