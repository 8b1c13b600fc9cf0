import crypto, { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { Worker } from 'node:worker_threads';

/**
 * scrypt's work block (128·N·r bytes: 16 MiB at the default cost) is malloc'd by the thread that runs it, and
 * glibc keeps such a block in that thread's arena once freed: on libuv's pool (4 threads) a few logins left
 * up to 64 MiB resident for good (the bench's server: ~35 MiB of its peak RSS). Costly checks therefore run
 * on one thread of their own, so that block is held once; cheap ones (the demo login's 1 MiB) stay on the pool.
 */
const OWN_THREAD_BYTES = 8 * 1024 * 1024;

const scrypt = (pw: string, salt: Buffer, len: number, opts: ScryptOptions & { N: number; r: number }) =>
  128 * opts.N * opts.r >= OWN_THREAD_BYTES
    ? hasher().run(pw, salt, len, opts)
    : new Promise<Buffer>((resolve, reject) => scryptCb(pw, salt, len, opts, (err, key) => (err ? reject(err) : resolve(key))));

const HASHER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
parentPort.on('message', (m) => {
  try {
    parentPort.postMessage({ id: m.id, key: new Uint8Array(scryptSync(m.password, Buffer.from(m.salt), m.len, m.opts)) });
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String((err && err.message) || err) });
  }
});`;

/** The hashing thread, started at its first use; it keeps the process alive only while a check is pending. */
function hasher() {
  if (hashing) return hashing;
  const worker = new Worker(HASHER_SOURCE, { eval: true });
  worker.unref();
  const pending = new Map<number, { resolve: (key: Buffer) => void; reject: (err: Error) => void }>();
  let next = 0;
  const fail = (err: Error) => {
    if (hashing?.worker === worker) hashing = undefined;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  worker.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (!pending.size) worker.unref();
    if (m.key) p.resolve(Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength));
    else p.reject(new Error(m.error));
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the password hashing thread exited (${code})`)));
  const run = (password: string, salt: Buffer, len: number, opts: ScryptOptions) =>
    new Promise<Buffer>((resolve, reject) => {
      const id = next++;
      if (!pending.size) worker.ref();
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, password, salt: new Uint8Array(salt), len, opts });
    });
  return (hashing = { worker, run });
}
let hashing: { worker: Worker; run: (password: string, salt: Buffer, len: number, opts: ScryptOptions) => Promise<Buffer> } | undefined;

type Cost = { N: number; r: number; p: number };
const PARAMS: Cost = { N: 16384, r: 8, p: 1 };
const KEY_LEN = 32;

/**
 * The cost for a password the database also keeps in clear: the demo login (in settings, printed at every
 * start). Stretching it protects nothing there, and at N=1024 its hash, and each start's check of it
 * (checkAhead), take ~3 ms of CPU instead of ~50 (and 1 MiB of memory instead of 16).
 */
export const KEPT_IN_CLEAR: Cost = { N: 1024, r: 8, p: 1 };

/** Hashes are `scrypt$N$r$p$salt$hash` (base64), so parameters can be raised later without breaking old rows. */
export async function hashPassword(password: string, cost: Cost = PARAMS): Promise<string> {
  const salt = randomBytes(16);
  const key = await limited(() => scrypt(password, salt, KEY_LEN, cost));
  const hash = `scrypt$${cost.N}$${cost.r}$${cost.p}$${salt.toString('base64')}$${key.toString('base64')}`;
  remember(hash, password);
  return hash;
}

/**
 * Hashes whose password this process knows, each with an HMAC of it (passwordTag, never the password):
 * the ones it made lately, and the demo login checked ahead at start-up. The right password for one of
 * them is known without running scrypt again, so the demo login's first request, or a new account's first
 * login, is answered at once; and at start-up scrypt's 16 MiB block is not allocated a second time, which
 * glibc would keep (measured: +16 MiB idle RSS). A wrong password still pays the full scrypt, so timing
 * tells nothing new.
 */
const known = new Map<string, string>();
const KNOWN_MAX = 64;

function remember(hash: string, password: string): void {
  known.set(hash, passwordTag(password));
  if (known.size > KNOWN_MAX) known.delete(known.keys().next().value!);
}

/**
 * Checks a password now so that its next check is free: for the login a process expects first (the demo
 * login it prints), checked while the server is still being built rather than on the first request.
 */
export async function checkAhead(password: string, stored: string | null): Promise<void> {
  if (stored && (await verifyPassword(password, stored))) remember(stored, password);
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  if (!stored) return false;
  const tag = known.get(stored);
  if (tag && sameTag(tag, passwordTag(password))) return true;
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64');
  const expected = Buffer.from(parts[5], 'base64');
  const key = await limited(() => scrypt(password, salt, expected.length, { N, r, p }));
  return timingSafeEqual(key, expected);
}

/**
 * At most a few hash checks run at once: scrypt is deliberately expensive, and a flood of wrong
 * passwords must not starve the thread pool that the database and file system also use.
 */
const MAX_CONCURRENT = 2;
let running = 0;
const waiting: (() => void)[] = [];

async function limited<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/**
 * A keyed tag of a password: SHA-256 of a secret per-process key and the password, in one one-shot hash
 * (2.8 µs for HMAC's two, ~1.3 µs for one: every Basic request computes one). Tags are only compared with
 * each other and never leave the process, so HMAC's protection against length extension buys nothing here;
 * the key keeps a memory dump from being a table of unsalted password hashes. The key is ASCII and the tag a
 * `binary` (latin1) string, a character a byte: the key and password go in as one string and no Buffer is made
 * on the way in or out (2.7–3.8 µs a tag on a loaded machine, where the Buffer form took 7–8 µs). Node before
 * 20.12 has no `crypto.hash`: createHash there.
 */
export function keyedTag(key: string): (message: string) => string {
  if (!/^[\x20-\x7e]*$/.test(key)) throw new Error('keyedTag: the key must be printable ASCII');
  if (typeof crypto.hash !== 'function') return (message) => createHash('sha256').update(key).update(message, 'utf8').digest('binary');
  return (message) => crypto.hash('sha256', key + message, 'binary');
}

/** A per-process key to remember verified passwords without keeping them (64 random bytes, as base64). */
export const passwordTag = keyedTag(randomBytes(64).toString('base64'));
/** Tags compared in constant time (they are 32 characters each). */
export const sameTag = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
};

export const randomPassword = (): string => randomBytes(12).toString('base64url');

/** The realm of HTTP Digest (the real API's literal). */
export const DIGEST_REALM = 'users';

/** What Digest needs stored: HA1 = MD5(email:realm:password), UTF-8. */
export const digestHa1 = (email: string, password: string): string => createHash('md5').update(`${email}:${DIGEST_REALM}:${password}`, 'utf8').digest('hex');

export const sha256Hex = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * Constant-time equality of two strings (secrets, tokens, MACs). Only the length can leak, and every
 * secret compared here has a fixed, public length.
 */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  if (x.length !== y.length) {
    timingSafeEqual(x, x); // same work either way
    return false;
  }
  return timingSafeEqual(x, y);
}

/** A hash to check against when the user does not exist, so an unknown e-mail costs as much as a wrong password. */
let dummy: Promise<string> | null = null;
export const dummyHash = (): Promise<string> => (dummy ??= hashPassword(randomBytes(16).toString('hex')));

/** Random token of `length` characters from [A-Za-z0-9] (rejection sampling: no modulo bias). */
export function randomAlnum(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += alphabet[byte % 62];
    }
  }
  return out;
}
