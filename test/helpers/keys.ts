import { generateKeyPairSync } from 'node:crypto';

/** A fresh RSA private key in PEM, encrypted with a passphrase (a key Stratus must refuse to read). */
export function encryptedRsaPem(): string {
  return generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
    cipher: 'aes-256-cbc',
    passphrase: 'x',
  }) as string;
}
