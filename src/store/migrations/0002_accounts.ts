import type { Kysely, Migration } from 'kysely';

/**
 * Accounts and authentication: what Digest needs next to the scrypt hash, cookie sessions, sign-up
 * confirmation tokens, Digest nonce counters and failed-login counters. Instants that are compared
 * (expiry, lockout) are epoch milliseconds in `bigint` columns, so both engines compare numbers.
 * Secrets (session ids, sign-up tokens) are stored only as SHA-256 hashes.
 */
export const accounts: Migration = {
  async up(db: Kysely<any>) {
    // HA1 = MD5(email:users:password), set together with password_hash; null until a password is set.
    await db.schema.alterTable('users').addColumn('digest_ha1', 'varchar(32)').execute();

    await db.schema
      .createTable('sessions')
      .addColumn('id_hash', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('user_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('csrf_token', 'varchar(64)', (c) => c.notNull())
      .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
      .addColumn('expires_ms', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('sessions_user').on('sessions').column('user_uuid').execute();
    await db.schema.createIndex('sessions_expiry').on('sessions').column('expires_ms').execute();

    await db.schema
      .createTable('signup_tokens')
      .addColumn('token_hash', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('user_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
      .addColumn('expires_ms', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('signup_tokens_user').on('signup_tokens').column('user_uuid').execute();

    // The highest `nc` seen per Digest nonce: a request must carry a higher one (replay protection).
    await db.schema
      .createTable('digest_nonces')
      .addColumn('nonce', 'varchar(128)', (c) => c.primaryKey())
      .addColumn('max_nc', 'bigint', (c) => c.notNull())
      .addColumn('expires_ms', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('digest_nonces_expiry').on('digest_nonces').column('expires_ms').execute();

    // Failed logins per key (sha256 of "account:…", "address:…" or "pair:…"), see login-guard.ts.
    await db.schema
      .createTable('login_failures')
      .addColumn('key', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('window_start_ms', 'bigint', (c) => c.notNull())
      .addColumn('failures', 'integer', (c) => c.notNull())
      .addColumn('locked_until_ms', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('login_failures_window').on('login_failures').column('window_start_ms').execute();
  },
};
