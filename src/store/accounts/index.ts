import type { Dialect } from '../db.js';
import { DigestNonceQueries } from './digest-nonces.js';
import { LoginFailureQueries } from './login-failures.js';
import { SessionQueries } from './sessions.js';
import { SignupTokenQueries } from './signup-tokens.js';
import { UserQueries } from './users.js';

/**
 * The accounts family's SQL (store/tables.ts family `accounts`), exposed as `store.accounts`: users and
 * their profiles, cookie sessions, the login guard's counters, one-time links, Digest nonces. The rules are
 * in resources/users/, resources/accounts/, resources/profile/ and http/auth/digest.ts.
 */
export class AccountQueries {
  readonly users: UserQueries;
  readonly sessions = new SessionQueries();
  readonly loginFailures = new LoginFailureQueries();
  readonly signupTokens = new SignupTokenQueries();
  readonly digestNonces = new DigestNonceQueries();

  constructor(dialect: Dialect) {
    this.users = new UserQueries(dialect);
  }
}

export type { ProfileRow, UserRow } from './users.js';
export type { SessionUser } from './sessions.js';
export type { FailureCounter } from './login-failures.js';
