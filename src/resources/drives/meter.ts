import type { Meter } from '../../core/metering.js';

/**
 * What drives use (reference §16.6): each account drive's size in bytes under its storage type (`dssd`,
 * `ssd`, ...), from its creation. Library drives belong to no account and cost nothing.
 */
export const driveUsage: Meter = async (s, db, _at, owner) => {
  const rows = await s.store.resources.owned(db, 'drives', { owner });
  return rows.map((r) => ({
    owner: r.owner_uuid!,
    keys: [String(r.body.storage_type ?? 'dssd')],
    amount: Number(r.body.size),
    since: Date.parse(r.created_at),
    uuid: r.uuid,
  }));
};
