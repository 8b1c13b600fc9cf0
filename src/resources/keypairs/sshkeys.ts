import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  generateKeyPairSync,
  sign,
  verify,
  type JsonWebKey,
  type KeyObject,
} from 'node:crypto';
import { promisify } from 'node:util';

/**
 * SSH keys without a dependency: the OpenSSH public key line (`ssh-rsa AAAA… comment`, RFC 4253 §6.6 wire
 * blob in base64), its MD5 fingerprint (`ssh-keygen -l -E md5`), PEM private keys (PKCS#1, PKCS#8, SEC1,
 * read by node:crypto) and unencrypted `OPENSSH PRIVATE KEY` files (what `ssh-keygen` writes by default,
 * decoded here). Keys travel between the formats as JWKs, which node:crypto imports and exports.
 * Anything that does not parse, or whose parts disagree, is a `KeyError`.
 */
export class KeyError extends Error {}

/** Key types accepted: RSA, Ed25519 and ECDSA on the NIST curves. */
export const KEY_TYPES = ['ssh-rsa', 'ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521'] as const;

const CURVES: Record<string, { ssh: string; size: number }> = {
  'P-256': { ssh: 'nistp256', size: 32 },
  'P-384': { ssh: 'nistp384', size: 48 },
  'P-521': { ssh: 'nistp521', size: 66 },
};
const curveBySsh = (name: string) => Object.entries(CURVES).find(([, c]) => c.ssh === name);

const RSA_MIN_BITS = 1024;
/** OpenSSH's own limit; private keys are capped lower because checking one signs with it (16384 bits: ~1 s). */
const RSA_MAX_BITS = { public: 16384, private: 8192 };

// ---------------------------------------------------------------------------------------------------
// SSH wire encoding (RFC 4251 §5)

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

export function sshString(data: Buffer | string): Buffer {
  const b = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
  return Buffer.concat([u32(b.length), b]);
}

/** An unsigned big-endian magnitude without leading zero bytes. */
function magnitude(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i++;
  return bytes.subarray(i);
}

/** mpint of a non-negative number: minimal, with a zero byte in front when the high bit is set. */
export function sshMpint(unsigned: Buffer): Buffer {
  const m = magnitude(unsigned);
  return sshString(m.length && m[0] & 0x80 ? Buffer.concat([Buffer.from([0]), m]) : m);
}

class Reader {
  constructor(
    private readonly buf: Buffer,
    private off = 0,
  ) {}

  u32(): number {
    if (this.off + 4 > this.buf.length) throw new KeyError('truncated key data');
    const v = this.buf.readUInt32BE(this.off);
    this.off += 4;
    return v;
  }

  bytes(): Buffer {
    const n = this.u32();
    if (n > this.buf.length - this.off) throw new KeyError('truncated key data');
    const b = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return b;
  }

  text(): string {
    return this.bytes().toString('latin1');
  }

  /** A non-negative mpint as its magnitude. */
  mpint(): Buffer {
    const b = this.bytes();
    if (b.length && b[0] & 0x80) throw new KeyError('negative number in key data');
    return magnitude(b);
  }

  rest(): Buffer {
    return this.buf.subarray(this.off);
  }

  get done(): boolean {
    return this.off === this.buf.length;
  }
}

// ---------------------------------------------------------------------------------------------------
// JWK <-> SSH public blob

const b64u = (b: Buffer) => b.toString('base64url');
const fromB64u = (s: string | undefined) => Buffer.from(s ?? '', 'base64url');
const big = (b: Buffer) => (b.length ? BigInt(`0x${b.toString('hex')}`) : 0n);
function unbig(n: bigint): Buffer {
  const hex = n.toString(16);
  return Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
}
function pad(b: Buffer, size: number): Buffer {
  if (b.length > size) throw new KeyError('number too large for the curve');
  return Buffer.concat([Buffer.alloc(size - b.length), b]);
}

/** The SSH public key blob of a node:crypto key (public or private): `ssh-rsa` = string type, mpint e, mpint n. */
export function sshPublicBlob(key: KeyObject): { type: string; blob: Buffer } {
  if (!['rsa', 'ed25519', 'ec'].includes(key.asymmetricKeyType ?? '')) throw new KeyError(`unsupported key type (supported: ${KEY_TYPES.join(', ')})`);
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  const jwk = pub.export({ format: 'jwk' }) as JsonWebKey;
  if (jwk.kty === 'RSA') {
    return { type: 'ssh-rsa', blob: Buffer.concat([sshString('ssh-rsa'), sshMpint(fromB64u(jwk.e)), sshMpint(fromB64u(jwk.n))]) };
  }
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') {
    return { type: 'ssh-ed25519', blob: Buffer.concat([sshString('ssh-ed25519'), sshString(fromB64u(jwk.x))]) };
  }
  if (jwk.kty === 'EC' && jwk.crv && CURVES[jwk.crv]) {
    const { ssh, size } = CURVES[jwk.crv];
    const type = `ecdsa-sha2-${ssh}`;
    const point = Buffer.concat([Buffer.from([4]), pad(fromB64u(jwk.x), size), pad(fromB64u(jwk.y), size)]);
    return { type, blob: Buffer.concat([sshString(type), sshString(ssh), sshString(point)]) };
  }
  throw new KeyError(`unsupported key type (supported: ${KEY_TYPES.join(', ')})`);
}

/** The public JWK a blob describes; throws on anything malformed or trailing. */
function jwkOfBlob(type: string, r: Reader): JsonWebKey {
  switch (type) {
    case 'ssh-rsa': {
      const e = r.mpint();
      const n = r.mpint();
      return { kty: 'RSA', e: b64u(e), n: b64u(n) };
    }
    case 'ssh-ed25519': {
      const x = r.bytes();
      if (x.length !== 32) throw new KeyError('an Ed25519 key is 32 bytes');
      return { kty: 'OKP', crv: 'Ed25519', x: b64u(x) };
    }
    default: {
      const curve = curveBySsh(type.replace(/^ecdsa-sha2-/, ''));
      if (!type.startsWith('ecdsa-sha2-') || !curve) throw new KeyError(`unsupported key type ${JSON.stringify(type)} (supported: ${KEY_TYPES.join(', ')})`);
      const [crv, { ssh, size }] = curve;
      if (r.text() !== ssh) throw new KeyError('the curve name does not match the key type');
      return { kty: 'EC', crv, ...ecPoint(r.bytes(), size) };
    }
  }
}

/** An uncompressed point `04 || X || Y` as JWK coordinates. */
function ecPoint(q: Buffer, size: number): { x: string; y: string } {
  if (q.length !== 1 + 2 * size || q[0] !== 4) throw new KeyError('malformed curve point');
  return { x: b64u(q.subarray(1, 1 + size)), y: b64u(q.subarray(1 + size)) };
}

function checkRsaSize(key: KeyObject, half: 'public' | 'private'): void {
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  const max = RSA_MAX_BITS[half];
  if (bits < RSA_MIN_BITS || bits > max) throw new KeyError(`RSA ${half} keys must have ${RSA_MIN_BITS} to ${max} bits (this one has ${bits})`);
}

// ---------------------------------------------------------------------------------------------------
// Public keys

export interface SshPublicKey {
  type: string;
  blob: Buffer;
  comment: string;
}

/**
 * An OpenSSH public key line: `<type> <base64 blob> [comment]`, surrounding whitespace ignored. The blob must
 * decode completely, name the same type, and hold a key node:crypto accepts (an EC point on its curve).
 */
export function parsePublicKey(text: string): SshPublicKey {
  const m = /^(\S+)[ \t]+([A-Za-z0-9+/]+={0,2})(?:[ \t]+([^\r\n]*))?$/.exec(text.trim());
  if (!m) throw new KeyError('expected an OpenSSH public key: "<type> <base64 key> [comment]"');
  const [, type, b64, comment = ''] = m;
  if (!(KEY_TYPES as readonly string[]).includes(type)) throw new KeyError(`unsupported key type ${JSON.stringify(type)} (supported: ${KEY_TYPES.join(', ')})`);
  const blob = Buffer.from(b64, 'base64');
  if (blob.toString('base64').replace(/=+$/, '') !== b64.replace(/=+$/, '')) throw new KeyError('the key is not valid base64');
  const r = new Reader(blob);
  if (r.text() !== type) throw new KeyError('the key data does not match its type');
  const jwk = jwkOfBlob(type, r);
  if (!r.done) throw new KeyError('trailing bytes after the key data');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: jwk, format: 'jwk' });
  } catch {
    throw new KeyError('the key data does not describe a valid key');
  }
  if (type === 'ssh-rsa') checkRsaSize(key, 'public');
  // A blob built back from the key must be the one given (rejects non-minimal encodings).
  if (!sshPublicBlob(key).blob.equals(blob)) throw new KeyError('the key data is not canonically encoded');
  return { type, blob, comment: comment.trim() };
}

export const formatPublicKey = (type: string, blob: Buffer, comment = ''): string => `${type} ${blob.toString('base64')}${comment ? ` ${comment}` : ''}`;

/** `ssh-keygen -l -E md5`: MD5 of the decoded blob, lower-case hex pairs joined by colons. */
export function md5Fingerprint(blob: Buffer): string {
  return createHash('md5').update(blob).digest('hex').match(/../g)!.join(':');
}

// ---------------------------------------------------------------------------------------------------
// Private keys

/** PEM label and base64 body; tolerant of lost or extra line breaks (libcloud strips newlines from keys). */
function readPem(text: string): { label: string; body: string; encrypted: boolean } {
  const m = /^-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----$/.exec(text.trim());
  if (!m) throw new KeyError('expected a PEM private key ("-----BEGIN … PRIVATE KEY-----")');
  const [, label, inner] = m;
  // RFC 1421 headers (Proc-Type, DEK-Info) only appear in encrypted legacy PEM.
  const encrypted = /Proc-Type:\s*4,ENCRYPTED/i.test(inner) || label === 'ENCRYPTED PRIVATE KEY';
  const body = inner.replace(/^[A-Za-z-]+:.*$/gm, '').replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) throw new KeyError('the PEM body is not valid base64');
  return { label, body, encrypted };
}

const wrapPem = (label: string, body: string) => `-----BEGIN ${label}-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END ${label}-----\n`;

const OPENSSH_MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');

/** An unencrypted `openssh-key-v1` file (PROTOCOL.key in OpenSSH) as a node:crypto private key. */
function openSshPrivateKey(raw: Buffer): KeyObject {
  if (!raw.subarray(0, OPENSSH_MAGIC.length).equals(OPENSSH_MAGIC)) throw new KeyError('not an OpenSSH private key');
  const r = new Reader(raw, OPENSSH_MAGIC.length);
  const cipher = r.text();
  r.text(); // kdf name
  r.bytes(); // kdf options
  if (r.u32() !== 1) throw new KeyError('the file must hold exactly one key');
  const header = r.bytes();
  const sealed = r.bytes();
  if (cipher !== 'none') throw new KeyError('passphrase-protected private keys are not accepted');
  const p = new Reader(sealed);
  if (p.u32() !== p.u32()) throw new KeyError('corrupt private key (check bytes differ)');
  const type = p.text();
  let jwk: JsonWebKey;
  if (type === 'ssh-rsa') {
    const [n, e, d, iqmp, pp, q] = [p.mpint(), p.mpint(), p.mpint(), p.mpint(), p.mpint(), p.mpint()];
    const D = big(d);
    jwk = {
      kty: 'RSA',
      n: b64u(n),
      e: b64u(e),
      d: b64u(d),
      p: b64u(pp),
      q: b64u(q),
      dp: b64u(unbig(D % (big(pp) - 1n))),
      dq: b64u(unbig(D % (big(q) - 1n))),
      qi: b64u(iqmp),
    };
  } else if (type === 'ssh-ed25519') {
    const pk = p.bytes();
    const sk = p.bytes();
    if (pk.length !== 32 || sk.length !== 64 || !sk.subarray(32).equals(pk)) throw new KeyError('corrupt Ed25519 private key');
    jwk = { kty: 'OKP', crv: 'Ed25519', x: b64u(pk), d: b64u(sk.subarray(0, 32)) };
  } else {
    const curve = curveBySsh(type.replace(/^ecdsa-sha2-/, ''));
    if (!type.startsWith('ecdsa-sha2-') || !curve) throw new KeyError(`unsupported key type ${JSON.stringify(type)}`);
    const [crv, { ssh, size }] = curve;
    if (p.text() !== ssh) throw new KeyError('the curve name does not match the key type');
    const point = ecPoint(p.bytes(), size);
    jwk = { kty: 'EC', crv, ...point, d: b64u(pad(p.mpint(), size)) };
  }
  p.text(); // comment
  const padding = p.rest();
  if (padding.length >= 8 || padding.some((b, i) => b !== i + 1)) throw new KeyError('corrupt private key (bad padding)');
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: jwk, format: 'jwk' });
  } catch {
    throw new KeyError('the private key data does not describe a valid key');
  }
  if (!sshPublicBlob(key).blob.equals(header)) throw new KeyError('corrupt private key (its public half differs)');
  return key;
}

/**
 * A private key in PEM: PKCS#1 (`RSA PRIVATE KEY`), PKCS#8 (`PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`) or
 * OpenSSH (`OPENSSH PRIVATE KEY`), unencrypted, of a supported type. A signature made with it must verify
 * with its public half, so a key whose parts were tampered with is refused too.
 */
export function parsePrivateKey(text: string): KeyObject {
  const { label, body, encrypted } = readPem(text);
  if (encrypted) throw new KeyError('passphrase-protected private keys are not accepted');
  let key: KeyObject;
  if (label === 'OPENSSH PRIVATE KEY') key = openSshPrivateKey(Buffer.from(body, 'base64'));
  else if (label === 'RSA PRIVATE KEY' || label === 'PRIVATE KEY' || label === 'EC PRIVATE KEY') {
    try {
      key = createPrivateKey({ key: wrapPem(label, body), format: 'pem' });
    } catch {
      throw new KeyError('the private key does not parse');
    }
  } else throw new KeyError(`unsupported PEM type ${JSON.stringify(label)}`);
  const { type } = sshPublicBlob(key); // throws for unsupported algorithms and curves
  if (type === 'ssh-rsa') checkRsaSize(key, 'private');
  const digest = type === 'ssh-ed25519' ? null : 'sha256';
  const probe = Buffer.from('stratus key check');
  let ok: boolean;
  try {
    ok = verify(digest, probe, createPublicKey(key), sign(digest, probe, key));
  } catch {
    ok = false;
  }
  if (!ok) throw new KeyError('the private key is inconsistent (its signature does not verify)');
  return key;
}

// ---------------------------------------------------------------------------------------------------
// Generation

export interface GeneratedPair {
  private_key: string;
  public_key: string;
}

const generateAsync = promisify(generateKeyPair);
const RSA_OPTIONS = { modulusLength: 2048, publicExponent: 0x10001 } as const;

function pairOf(privateKey: KeyObject): GeneratedPair {
  const { type, blob } = sshPublicBlob(privateKey);
  return { private_key: privateKey.export({ type: 'pkcs1', format: 'pem' }) as string, public_key: formatPublicKey(type, blob) };
}

/** A new RSA 2048 pair: PKCS#1 PEM private key and `ssh-rsa` public line. Generated off the event loop. */
export async function generateRsaPair(): Promise<GeneratedPair> {
  const { privateKey } = await generateAsync('rsa', RSA_OPTIONS);
  return pairOf(privateKey);
}

export function generateRsaPairSync(): GeneratedPair {
  return pairOf(generateKeyPairSync('rsa', RSA_OPTIONS).privateKey);
}
