import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { SMTPServer } from 'smtp-server';
import type { Client, Response } from './client.js';

export const md5 = (s: string) => createHash('md5').update(s, 'utf8').digest('hex');
export const basic = (user: string, pass: string) => 'Basic ' + Buffer.from(`${user}:${pass}`).toString('base64');

/** Every value of one response header, as separate lines (rawHeaders keeps repeats apart). */
export function headerLines(res: Response, name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < res.rawHeaders.length; i += 2) if (res.rawHeaders[i].toLowerCase() === name.toLowerCase()) out.push(res.rawHeaders[i + 1]);
  return out;
}

/** The parameters of a challenge or Authorization value (`Digest a="b", c=d`). */
export function authParams(value: string): Record<string, string> {
  const out: Record<string, string> = {};
  const re = /([A-Za-z0-9_-]+)=(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (const m of value.replace(/^\w+\s+/, '').matchAll(re)) out[m[1]] = m[2] ?? m[3];
  return out;
}

/** The Digest challenge of a 401 (fails the test if there is none). */
export function digestChallenge(res: Response): Record<string, string> {
  const line = headerLines(res, 'www-authenticate').find((l) => /^Digest\s/i.test(l));
  if (!line) throw new Error(`no Digest challenge in ${JSON.stringify(res.rawHeaders)}`);
  return authParams(line);
}

export interface DigestInput {
  username: string;
  password: string;
  method: string;
  uri: string;
  nonce: string;
  opaque?: string;
  nc: number;
  cnonce?: string;
  realm?: string;
  qop?: string | null;
  algorithm?: string;
  /** Override the computed response (tampering). */
  response?: string;
}

/** An `Authorization: Digest …` value computed as RFC 2617 says (MD5, qop=auth). */
export function digestHeader(d: DigestInput): string {
  const realm = d.realm ?? 'users';
  const qop = d.qop === undefined ? 'auth' : d.qop;
  const nc = d.nc.toString(16).padStart(8, '0');
  const cnonce = d.cnonce ?? randomBytes(8).toString('hex');
  const ha1 = md5(`${d.username}:${realm}:${d.password}`);
  const ha2 = md5(`${d.method}:${d.uri}`);
  const response = d.response ?? (qop ? md5(`${ha1}:${d.nonce}:${nc}:${cnonce}:${qop}:${ha2}`) : md5(`${ha1}:${d.nonce}:${ha2}`));
  const parts = [
    `username="${d.username}"`,
    `realm="${realm}"`,
    `nonce="${d.nonce}"`,
    `uri="${d.uri}"`,
    `response="${response}"`,
    `algorithm="${d.algorithm ?? 'MD5'}"`,
  ];
  if (d.opaque !== undefined) parts.push(`opaque="${d.opaque}"`);
  if (qop) parts.push(`qop=${qop}`, `nc=${nc}`, `cnonce="${cnonce}"`);
  return `Digest ${parts.join(', ')}`;
}

/** A fresh Digest challenge from the server (an unauthenticated request). */
export async function freshChallenge(anon: Client, path = 'profile/'): Promise<{ nonce: string; opaque: string }> {
  const res = await anon.get(path);
  if (res.status !== 401) throw new Error(`expected 401, got ${res.status}`);
  const c = digestChallenge(res);
  return { nonce: c.nonce, opaque: c.opaque };
}

/** Runs curl (a real Digest client) and returns status and body. */
export function curl(args: string[]): Promise<{ status: number[]; body: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '-w', '\n%{http_code}\n', ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`curl failed: ${stderr || err.message}`));
      const lines = stdout.split('\n');
      // With several URLs, curl prints each body followed by its own status line.
      const status = lines.filter((l) => /^\d{3}$/.test(l)).map(Number);
      resolve({ status, body: stdout });
    });
  });
}

/** Cookies set by a response: name -> { value, attributes (lower-case keys) }. */
export function setCookies(res: Response): Map<string, { value: string; attrs: Record<string, string | true> }> {
  const out = new Map<string, { value: string; attrs: Record<string, string | true> }>();
  for (const line of headerLines(res, 'set-cookie')) {
    const [pair, ...rest] = line.split(';');
    const eq = pair.indexOf('=');
    const attrs: Record<string, string | true> = {};
    for (const a of rest) {
      const [k, ...v] = a.trim().split('=');
      attrs[k.toLowerCase()] = v.length ? v.join('=') : true;
    }
    out.set(pair.slice(0, eq).trim(), { value: pair.slice(eq + 1).trim(), attrs });
  }
  return out;
}

export interface SinkMail {
  from: string;
  to: string[];
  raw: string;
  subject: string;
  /** The text body with quoted-printable undone. */
  text: string;
}

/** Undo quoted-printable (soft line breaks and =XX bytes). */
export function decodeQuotedPrintable(s: string): string {
  const joined = s.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < joined.length; i++) {
    if (joined[i] === '=' && /^[0-9A-F]{2}$/i.test(joined.slice(i + 1, i + 3))) {
      bytes.push(parseInt(joined.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...Buffer.from(joined[i], 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Splits a raw message into its subject and decoded text body. */
export function parseMail(raw: string): { subject: string; text: string; to: string } {
  const normalized = raw.replace(/\r\n/g, '\n');
  const split = normalized.indexOf('\n\n');
  const head = normalized.slice(0, split);
  const body = normalized.slice(split + 2);
  const header = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(head)?.[1] ?? '';
  const qp = /quoted-printable/i.test(header('Content-Transfer-Encoding'));
  const b64 = /base64/i.test(header('Content-Transfer-Encoding'));
  const text = qp ? decodeQuotedPrintable(body) : b64 ? Buffer.from(body, 'base64').toString('utf8') : body;
  return { subject: header('Subject'), text, to: header('To') };
}

/** The sign-up link in a mail text. */
export const linkIn = (text: string): string | null => /https?:\/\/\S+\/accounts\/confirm\/[A-Za-z0-9_-]+/.exec(text)?.[0] ?? null;

/**
 * A real SMTP server on a loopback port that keeps what it receives. `acceptDelayMs`: a slow server, which
 * keeps and acknowledges each message only that long after its data arrived (a sender killed meanwhile
 * must send it again).
 */
export async function smtpSink(opts: { acceptDelayMs?: number } = {}): Promise<{
  url: string;
  mails: SinkMail[];
  /** Messages whose data arrived and that are not kept yet (`acceptDelayMs`): 0 when every one sent is in `mails`. */
  readonly accepting: number;
  /** Resolves with the next mail to `to` (already received ones first). */
  next(to: string): Promise<SinkMail>;
  close(): Promise<void>;
}> {
  const mails: SinkMail[] = [];
  let accepting = 0;
  const taken = new Set<SinkMail>();
  const waiters: { to: string; resolve: (m: SinkMail) => void }[] = [];
  const deliver = () => {
    for (const w of [...waiters]) {
      const m = mails.find((x) => !taken.has(x) && x.to.includes(w.to));
      if (m) {
        taken.add(m);
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const parsed = parseMail(raw);
        accepting++;
        const keep = () => {
          accepting--;
          mails.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
            raw,
            subject: parsed.subject,
            text: parsed.text,
          });
          deliver();
          callback();
        };
        if (opts.acceptDelayMs) setTimeout(keep, opts.acceptDelayMs);
        else keep();
      });
    },
  });
  // A sender killed mid-conversation resets its connection: not the sink's failure.
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    get accepting() {
      return accepting;
    },
    next(to: string) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no mail to ${to} within 10 s`)), 10_000);
        waiters.push({
          to: to.toLowerCase(),
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
        });
        deliver();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
