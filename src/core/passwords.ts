import { createHmac, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const scrypt = (pw: string, salt: Buffer, len: number, opts: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) => scryptCb(pw, salt, len, opts, (err, key) => (err ? reject(err) : resolve(key))));

const PARAMS = { N: 16384, r: 8, p: 1 };
const KEY_LEN = 32;

/** Hashes are `scrypt$N$r$p$salt$hash` (base64), so parameters can be raised later without breaking old rows. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await limited(() => scrypt(password, salt, KEY_LEN, PARAMS));
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  if (!stored) return false;
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

/** A per-process key to remember verified passwords without keeping them. */
const cacheKey = randomBytes(32);
export const passwordTag = (password: string): Buffer => createHmac('sha256', cacheKey).update(password).digest();
export const sameTag = (a: Buffer, b: Buffer): boolean => a.length === b.length && timingSafeEqual(a, b);

export const randomPassword = (): string => randomBytes(12).toString('base64url');
