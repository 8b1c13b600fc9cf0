import type { Db, Tx } from '../db.js';

/**
 * Digest replay protection (`digest_nonces`): the highest `nc` accepted per nonce, until the nonce expires.
 * The protocol is http/auth/digest.ts's; this is its SQL.
 */
export class DigestNonceQueries {
  /**
   * Accepts `nc` for a nonce if it is above every `nc` accepted before (one atomic upsert, so it holds
   * across processes); false for a replay.
   */
  async accept(db: Db | Tx, nonce: string, nc: number, expiresMs: number): Promise<boolean> {
    const accepted = await db
      .insertInto('digest_nonces')
      .values({ nonce, max_nc: nc, expires_ms: expiresMs })
      .onConflict((oc) =>
        oc
          .column('nonce')
          .doUpdateSet((eb) => ({ max_nc: eb.ref('excluded.max_nc') }))
          .where('digest_nonces.max_nc', '<', nc),
      )
      .returning('nonce')
      .executeTakeFirst();
    return accepted !== undefined;
  }

  /** Forgets nonces expired before `nowMs`. */
  async prune(db: Db | Tx, nowMs: number): Promise<void> {
    await db.deleteFrom('digest_nonces').where('expires_ms', '<', nowMs).execute();
  }
}
