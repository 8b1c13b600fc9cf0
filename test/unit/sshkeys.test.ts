import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  formatPublicKey,
  generateRsaPair,
  KeyError,
  md5Fingerprint,
  parsePrivateKey,
  parsePublicKey,
  sshMpint,
  sshPublicBlob,
  sshString,
} from '../../src/resources/keypairs/sshkeys.js';
import { golden } from '../helpers/golden.js';
import { encryptedRsaPem } from '../helpers/keys.js';
import { needs } from '../helpers/skips.js';

function withTmp<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-keys-'));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function sshKeygen(args: string[]): string {
  const res = spawnSync('ssh-keygen', args, { encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  return res.stdout.trim();
}

/** Every keypair object in the recorded keypair/pubkey dumps. */
function recordedKeys(): { fingerprint: string; public_key: string; private_key?: string | null }[] {
  const names = [
    'response_autogen_keypair_create',
    'response_self_gen_keypair_create',
    'response_pub_key_only_keypair_create',
    'response_keypair_list',
    'response_pubkeys_list',
  ];
  return names.flatMap((n) => golden(n).objects);
}

test('mpint and string encodings: the RFC 4251 §5 examples', () => {
  const hex = (b: Buffer) => b.toString('hex');
  assert.equal(hex(sshMpint(Buffer.alloc(0))), '00000000');
  assert.equal(hex(sshMpint(Buffer.from('00', 'hex'))), '00000000');
  assert.equal(hex(sshMpint(Buffer.from('09a378f9b2e332a7', 'hex'))), '0000000809a378f9b2e332a7');
  assert.equal(hex(sshMpint(Buffer.from('80', 'hex'))), '000000020080');
  assert.equal(hex(sshMpint(Buffer.from('000080', 'hex'))), '000000020080', 'leading zeros are dropped');
  assert.equal(hex(sshString('testing')), '0000000774657374696e67');
});

test('recorded keys: public key and MD5 fingerprint derived from each private key match the dumps', () => {
  const keys = recordedKeys();
  assert.ok(keys.length >= 5);
  for (const k of keys) {
    const pub = parsePublicKey(k.public_key);
    assert.equal(md5Fingerprint(pub.blob), k.fingerprint);
    if (k.private_key) {
      const { type, blob } = sshPublicBlob(parsePrivateKey(k.private_key));
      assert.equal(formatPublicKey(type, blob), k.public_key);
    }
  }
});

test("a generated pair: PKCS#1 PEM, 2048 bits, ssh-rsa line that is the private key's public half", async () => {
  const pair = await generateRsaPair();
  assert.match(pair.private_key, /^-----BEGIN RSA PRIVATE KEY-----\n([A-Za-z0-9+/=]{1,64}\n)+-----END RSA PRIVATE KEY-----\n$/);
  assert.match(pair.public_key, /^ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ[A-Za-z0-9+/]+={0,2}$/);
  const key = parsePrivateKey(pair.private_key);
  assert.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
  assert.equal(formatPublicKey('ssh-rsa', sshPublicBlob(key).blob), pair.public_key);
});

test('ssh-keygen agrees: -y on our generated private key gives our public key, -l -E md5 our fingerprint', { skip: needs('ssh-keygen') }, async () => {
  const pair = await generateRsaPair();
  withTmp((dir) => {
    writeFileSync(join(dir, 'id'), pair.private_key, { mode: 0o600 });
    writeFileSync(join(dir, 'id.pub'), `${pair.public_key}\n`);
    assert.equal(sshKeygen(['-y', '-f', join(dir, 'id')]), pair.public_key);
    const fp = md5Fingerprint(parsePublicKey(pair.public_key).blob);
    assert.match(sshKeygen(['-l', '-E', 'md5', '-f', join(dir, 'id.pub')]), new RegExp(`^2048 MD5:${fp} `));
  });
});

test('keys made by ssh-keygen (OpenSSH and PEM files): each private key parses to its .pub, fingerprints agree', { skip: needs('ssh-keygen') }, () => {
  withTmp((dir) => {
    const kinds: [string, string[]][] = [
      ['rsa', ['-t', 'rsa', '-b', '2048']],
      ['rsapem', ['-t', 'rsa', '-b', '2048', '-m', 'PEM']],
      ['ed25519', ['-t', 'ed25519']],
      ['p256', ['-t', 'ecdsa', '-b', '256']],
      ['p384', ['-t', 'ecdsa', '-b', '384']],
      ['p521', ['-t', 'ecdsa', '-b', '521']],
    ];
    for (const [name, args] of kinds) {
      const file = join(dir, name);
      sshKeygen(['-q', ...args, '-N', '', '-C', `${name}@test`, '-f', file]);
      const pubLine = readFileSync(`${file}.pub`, 'utf8');
      const pub = parsePublicKey(pubLine);
      assert.equal(pub.comment, `${name}@test`);
      assert.ok(sshPublicBlob(parsePrivateKey(readFileSync(file, 'utf8'))).blob.equals(pub.blob), name);
      assert.match(sshKeygen(['-l', '-E', 'md5', '-f', `${file}.pub`]), new RegExp(` MD5:${md5Fingerprint(pub.blob)} `), name);
    }
    // A passphrase-protected key is refused, not half-read.
    sshKeygen(['-q', '-t', 'ed25519', '-N', 'secret', '-f', join(dir, 'locked')]);
    assert.throws(() => parsePrivateKey(readFileSync(join(dir, 'locked'), 'utf8')), KeyError);
  });
});

test('ed25519 and ECDSA keys from node:crypto: PKCS#8 and SEC1 PEM parse; the public blob has the OpenSSH layout', () => {
  const ed = generateKeyPairSync('ed25519');
  const edBlob = sshPublicBlob(parsePrivateKey(ed.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string));
  assert.equal(edBlob.type, 'ssh-ed25519');
  assert.equal(edBlob.blob.length, 4 + 11 + 4 + 32);
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecBlob = sshPublicBlob(parsePrivateKey(ec.privateKey.export({ type: 'sec1', format: 'pem' }) as string));
  assert.equal(ecBlob.type, 'ecdsa-sha2-nistp256');
  assert.equal(ecBlob.blob.length, 4 + 19 + 4 + 8 + 4 + 65);
  assert.ok(parsePublicKey(formatPublicKey(ecBlob.type, ecBlob.blob)).blob.equals(ecBlob.blob));
});

test('libcloud-style inputs: a public key with a trailing newline, a PEM whose newlines were stripped', () => {
  const k = golden('response_self_gen_keypair_create').objects[0];
  assert.ok(parsePublicKey(`${k.public_key}\n`).blob.equals(parsePublicKey(k.public_key).blob));
  assert.doesNotThrow(() => parsePrivateKey(k.private_key.replace(/\n/g, '')));
});

test('malformed public keys are KeyErrors', () => {
  const good = golden('response_pub_key_only_keypair_create').objects[0].public_key as string;
  const [, b64] = good.split(' ');
  const blob = Buffer.from(b64, 'base64');
  const small = generateKeyPairSync('rsa', { modulusLength: 512 }).publicKey;
  const bad = [
    '',
    'ssh-rsa',
    'not a key',
    `ssh-dss ${b64}`,
    `ecdsa-sha2-nistp256 ${b64}`, // the blob says ssh-rsa
    `ssh-rsa ${b64.slice(0, 40)}`, // truncated
    `ssh-rsa ${b64}!!`,
    `ssh-rsa ${Buffer.concat([blob, Buffer.from([0])]).toString('base64')}`, // trailing byte
    `ssh-rsa ${b64.replace(/A/g, '*')}`,
    formatPublicKey('ssh-rsa', sshPublicBlob(small).blob), // 512 bits
    `ssh-ed25519 ${Buffer.concat([sshString('ssh-ed25519'), sshString(Buffer.alloc(31))]).toString('base64')}`,
    `ecdsa-sha2-nistp256 ${Buffer.concat([sshString('ecdsa-sha2-nistp256'), sshString('nistp256'), sshString(Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]))]).toString('base64')}`, // not on the curve
  ];
  for (const text of bad) assert.throws(() => parsePublicKey(text), KeyError, JSON.stringify(text));
});

test('malformed, encrypted or tampered private keys are KeyErrors', () => {
  const pem = golden('response_self_gen_keypair_create').objects[0].private_key as string;
  const lines = pem.split('\n');
  // Flip a character deep inside the key material (the private exponent / CRT values).
  const tampered = [...lines];
  tampered[8] = tampered[8].slice(0, 10) + (tampered[8][10] === 'A' ? 'B' : 'A') + tampered[8].slice(11);
  const encrypted = encryptedRsaPem();
  const bad = [
    '',
    'hello',
    pem.replace('RSA PRIVATE KEY-----\n', 'RSA PRIVATE KEY-----\n!!'),
    pem.replace('-----END RSA PRIVATE KEY-----', '-----END EC PRIVATE KEY-----'),
    pem.replace(/BEGIN RSA PRIVATE KEY/, 'BEGIN CERTIFICATE').replace(/END RSA PRIVATE KEY/, 'END CERTIFICATE'),
    tampered.join('\n'),
    lines.slice(0, 5).concat(lines.slice(-2)).join('\n'),
    encrypted,
    generateKeyPairSync('dsa', { modulusLength: 1024, divisorLength: 160 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  ];
  for (const text of bad) assert.throws(() => parsePrivateKey(text), KeyError, text.slice(0, 80));
});
