import { X509Certificate, createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../config.js';
import { ConfigError } from '../core/errors.js';

/**
 * HTTPS as the real hosts. A client that reaches `https://zrh.cloudsigma.com/api/2.0/` needs only a name
 * mapping (hosts file, `curl --resolve`) and this service's CA in its trust store: no change in its code.
 *
 * The CA is made once and kept in the data folder (`<folder of the SQLite file, or ./data>/tls/`), so a
 * client trusts it once; the server certificate is issued by it at every start, for `*.cloudsigma.com`,
 * `*.<location>.cloudsigma.com` (`direct.zrh.cloudsigma.com`), `localhost` and the listen address, so a
 * change of address or location needs no step. `--tls-cert`/`--tls-key` serve the operator's own instead.
 *
 * Certificates are built with node-forge (a maintained, dependency-free X.509 library; Node has none of its
 * own): keys come from Node's native generator, so a start with TLS costs ~0.1 s, and nothing is spawned
 * (the `openssl` binary is not on every machine). node-forge loads only with --tls.
 */
export interface TlsMaterial {
  key: string;
  cert: string;
  /** The CA a client must trust, when the local CA issued the certificate. */
  caFile: string | null;
  /** Names the certificate is valid for (shown at start-up). */
  names: string[];
}

const DAY = 24 * 60 * 60 * 1000;

/** Where the local CA lives: beside a SQLite file, else ./data (PostgreSQL, `:memory:`). */
export function tlsFolder(config: Pick<Config, 'db'>): string {
  const file = config.db !== ':memory:' && !/^postgres(ql)?:\/\//.test(config.db);
  return join(file ? dirname(resolve(config.db)) : resolve('data'), 'tls');
}

/** The DNS names and addresses the served certificate names. */
export function certificateNames(config: Pick<Config, 'host' | 'location'> & Partial<Pick<Config, 'locations'>>): { dns: string[]; ips: string[] } {
  const served = config.locations && config.locations.length > 1 ? config.locations : [config.location];
  const dns = ['*.cloudsigma.com', 'cloudsigma.com', ...served.map((l) => `*.${l}.cloudsigma.com`), 'localhost'];
  // Several locations: each also by its local name (http/locations.ts), which a wildcard under `localhost` cannot cover.
  if (served.length > 1) dns.push(...served.flatMap((l) => [`${l}.localhost`, `direct.${l}.localhost`]));
  const ips = ['127.0.0.1', '::1'];
  const host = config.host;
  if (isIP(host)) {
    if (host !== '0.0.0.0' && host !== '::' && !ips.includes(host)) ips.push(host);
  } else if (!dns.includes(host)) dns.push(host);
  return { dns, ips };
}

export async function loadTls(config: Config): Promise<TlsMaterial | null> {
  if (config.tlsCert || config.tlsKey) return operatorCertificate(config);
  if (!config.tls) return null;
  return localCertificate(config);
}

function operatorCertificate(config: Config): TlsMaterial {
  if (!config.tlsCert || !config.tlsKey) throw new ConfigError('tls-cert and tls-key go together: give both PEM files');
  const cert = readFileSync(config.tlsCert, 'utf8');
  const key = readFileSync(config.tlsKey, 'utf8');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
    createPrivateKey(key);
  } catch {
    throw new ConfigError('tls-cert/tls-key: not a PEM certificate and private key');
  }
  if (!x509.checkPrivateKey(createPrivateKey(key))) throw new ConfigError('tls-key is not the key of tls-cert');
  return { key, cert, caFile: null, names: (x509.subjectAltName ?? '').split(', ').filter(Boolean) };
}

/** Write a file whole (by rename): several processes starting at once never read half a file. */
function writeWhole(path: string, text: string, mode: number): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, text, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, path);
}

async function localCertificate(config: Config): Promise<TlsMaterial> {
  // eslint-disable-next-line no-restricted-syntax -- node-forge is needed only with --tls
  const forge = (await import('node-forge')).default;
  const { pki, md } = forge;
  const dir = tlsFolder(config);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    throw new ConfigError(`tls: cannot create the folder ${dir} for the local CA: check the --db folder's permissions`);
  }
  const caFile = join(dir, 'ca.pem');
  const caKeyFile = join(dir, 'ca-key.pem');
  const now = Date.now();
  const pemKeys = () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return {
      privateKey: pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()),
      publicKey: pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString()),
    };
  };
  const serial = () => '01' + randomBytes(15).toString('hex');

  // The CA: made once, kept (a client trusts it once). A CA that cannot be read is an error, not replaced.
  if (!existsSync(caFile) || !existsSync(caKeyFile)) {
    const keys = pemKeys();
    const ca = pki.createCertificate();
    ca.publicKey = keys.publicKey;
    ca.serialNumber = serial();
    ca.validity.notBefore = new Date(now - DAY);
    ca.validity.notAfter = new Date(now + 10 * 365 * DAY);
    const subject = [
      { name: 'commonName', value: `Stratus local CA (${randomBytes(4).toString('hex')})` },
      { name: 'organizationName', value: 'Stratus (simulated CloudSigma)' },
    ];
    ca.setSubject(subject);
    ca.setIssuer(subject);
    ca.setExtensions([
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    ca.sign(keys.privateKey, md.sha256.create());
    writeWhole(caKeyFile, pki.privateKeyToPem(keys.privateKey), 0o600);
    writeWhole(caFile, pki.certificateToPem(ca), 0o644);
  }
  let ca: ReturnType<typeof pki.certificateFromPem>;
  let caKey: ReturnType<typeof pki.privateKeyFromPem>;
  try {
    ca = pki.certificateFromPem(readFileSync(caFile, 'utf8'));
    caKey = pki.privateKeyFromPem(readFileSync(caKeyFile, 'utf8'));
  } catch {
    throw new ConfigError(`tls: ${caFile} or ${caKeyFile} is not a PEM certificate or key: remove both to make a new CA`);
  }

  // The server certificate: new at every start, for this start's names (397 days: within what browsers accept).
  const { dns, ips } = certificateNames(config);
  const keys = pemKeys();
  const cert = pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(now - DAY);
  cert.validity.notAfter = new Date(now + 397 * DAY);
  cert.setSubject([{ name: 'commonName', value: `${config.location}.cloudsigma.com` }]);
  cert.setIssuer(ca.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    { name: 'subjectAltName', altNames: [...dns.map((value) => ({ type: 2, value })), ...ips.map((ip) => ({ type: 7, ip }))] },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: ca.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(caKey, md.sha256.create());
  const certPem = pki.certificateToPem(cert);
  const keyPem = pki.privateKeyToPem(keys.privateKey);
  // Kept beside the CA for tools that want the files (`openssl s_client`); the server uses them from memory.
  writeWhole(join(dir, 'server-key.pem'), keyPem, 0o600);
  writeWhole(join(dir, 'server.pem'), certPem, 0o644);
  return { key: keyPem, cert: certPem, caFile, names: [...dns, ...ips] };
}
