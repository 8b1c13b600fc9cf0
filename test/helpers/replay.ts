import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { GOLDEN_DIR, goldenText } from './golden.js';

/**
 * The recorded exchanges (test/data/golden/dumps/) as data a test can replay: each `request_<name>` with
 * its `response_<name>`, parsed into method, path, headers and JSON bodies.
 */
export interface RecordedRequest {
  method: string;
  /** Path and query as recorded (`/api/2.0/servers/<uuid>/action/?do=start`). */
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

export interface RecordedResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export interface Exchange {
  /** `server_start`, or `vrouters/vrfwpolicy_get` for the virtual-router folder. */
  name: string;
  request: RecordedRequest | null;
  response: RecordedResponse | null;
}

/** One HTTP message: start line, headers, blank line, an optional JSON body (null when empty or not HTTP). */
function parseMessage(text: string): { start: string; headers: Record<string, string>; body: unknown } | null {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  const start = lines[0] ?? '';
  if (!/^(GET|POST|PUT|DELETE|HEAD|OPTIONS) \S+ HTTP\/1\.[01]$/.test(start) && !/^HTTP\/1\.[01] \d{3}/.test(start)) return null;
  const headers: Record<string, string> = {};
  let i = 1;
  for (; i < lines.length && lines[i].trim() !== ''; i++) {
    const at = lines[i].indexOf(':');
    if (at > 0) headers[lines[i].slice(0, at).trim().toLowerCase()] = lines[i].slice(at + 1).trim();
  }
  const rest = lines
    .slice(i + 1)
    .join('\n')
    .trim();
  // Two recordings end a list with a comma (`[…],\n}`); the real service read them as JSON all the same.
  return { start, headers, body: rest ? JSON.parse(rest.replace(/,(\s*[}\]])/g, '$1')) : null };
}

export function loadExchange(name: string): Exchange {
  const file = (kind: 'request' | 'response') => {
    const slash = name.lastIndexOf('/');
    return slash < 0 ? `${kind}_${name}` : `${name.slice(0, slash + 1)}${kind}_${name.slice(slash + 1)}`;
  };
  const req = existsSync(join(GOLDEN_DIR, file('request'))) ? parseMessage(goldenText(file('request'))) : null;
  const res = existsSync(join(GOLDEN_DIR, file('response'))) ? parseMessage(goldenText(file('response'))) : null;
  return {
    name,
    request: req && { method: req.start.split(' ')[0], path: req.start.split(' ')[1], headers: req.headers, body: req.body },
    response: res && { status: Number(res.start.split(' ')[1]), headers: res.headers, body: res.body },
  };
}

/** Every recorded exchange's name (pairs and lone requests), `vrouters/` ones prefixed. */
export function exchangeNames(): string[] {
  const names = new Set<string>();
  for (const dir of ['', 'vrouters/'])
    for (const f of readdirSync(join(GOLDEN_DIR, dir))) {
      const m = /^(?:request|response)_(.+)$/.exec(f);
      if (m) names.add(`${dir}${m[1]}`);
    }
  return [...names].sort();
}

/**
 * The answer has the recorded shape: the same keys at every level, the same JSON types, lists compared by
 * their first items. A null on either side matches any type: which keys are null depends on the object's
 * state (a stopped server's `runtime`, an unattached NIC's `ip_v4_conf`), not on the API's shape. A
 * `meta` dict is the user's free-form data.
 */
export function compatibleShape(actual: unknown, expected: unknown, path = '$'): void {
  if (expected === null || actual === null) return;
  const type = (v: unknown) => (Array.isArray(v) ? 'array' : typeof v);
  assert.equal(type(actual), type(expected), `${path}: type`);
  if (Array.isArray(expected)) {
    const got = actual as unknown[];
    if (expected.length && got.length) compatibleShape(got[0], expected[0], `${path}[0]`);
    return;
  }
  if (typeof expected !== 'object') return;
  if (/\.meta$/.test(path)) return;
  assert.deepEqual(Object.keys(actual as object).sort(), Object.keys(expected as object).sort(), `${path}: keys`);
  for (const k of Object.keys(expected as object)) compatibleShape((actual as any)[k], (expected as any)[k], `${path}.${k}`);
}

/** One value of an answer that differs from the record: where, what was recorded, what Stratus answered. */
export interface Difference {
  path: string;
  recorded: unknown;
  ours: unknown;
}

/**
 * What may differ between a recorded answer and ours without being a difference, by name: only values that
 * another service at another moment must make differently. Each one still holds something: ids map one to
 * one (the same recorded uuid is the same uuid of ours everywhere in the answer), a timestamp stays a
 * timestamp, a URI keeps its kind.
 */
export const NORMALISATIONS = {
  uuid: 'a uuid made by the service (a new object, a job, the account): any uuid, but one to one with the record',
  resource_uri: 'a `/api/2.0/<kind>/<id>/` URI: the same kind, its id one to one with the record (as `uuid`)',
  timestamp: 'an ISO 8601 moment (created, last_modified, …): the recording was made at another time',
  mac: "a NIC's MAC address, made by the simulator: any MAC, one to one with the record",
  ip: 'an IPv4 address from the pool (IP objects, DHCP leases): any address, one to one with the record',
  secret:
    'a key pair, fingerprint or VNC password the service generated (`private_key`, `public_key`, `fingerprint`, `vnc_password`) the request did not send: any string',
  endpoint: "a console or VNC URL (`console_url`, `vnc_url`): the same scheme, at this server's host and a port it opened",
} as const;
export type Normalisation = keyof typeof NORMALISATIONS;

const SECRET_KEYS = new Set(['private_key', 'public_key', 'fingerprint', 'vnc_password']);
const ENDPOINT_KEYS = new Set(['console_url', 'vnc_url']);
const WHOLE_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const WHOLE_URI = /^\/api\/2\.0\/([a-z_]+)\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{1,3}(?:\.\d{1,3}){3}|\d+)\/$/;
const WHOLE_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;
const WHOLE_MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const WHOLE_IP = /^\d{1,3}(\.\d{1,3}){3}$/;

/**
 * Every value of the recorded answer compared with ours, field by field: the same keys, the same list
 * lengths, equal scalars, but for the NORMALISATIONS (counted in `normalised`). `ids` maps the recorded ids
 * the replay replaced (its objects) to ours; every other id is bound one to one on first sight. A `meta`
 * dict is compared too: the replay sends the recorded one. Returns the differences, none when equal.
 */
export function valueDifferences(
  actual: unknown,
  recorded: unknown,
  ids: ReadonlyMap<string, string>,
  sent: unknown,
  normalised: Partial<Record<Normalisation, number>> = {},
): Difference[] {
  const sentText = JSON.stringify(sent ?? null);
  const out: Difference[] = [];
  const forward = new Map(ids);
  const backward = new Map([...ids].map(([k, v]) => [v, k]));
  // A recorded id and ours belong together everywhere, or not at all.
  const bind = (rec: string, ours: string) => {
    const was = forward.get(rec);
    if (was !== undefined) return was === ours;
    if (backward.has(ours)) return backward.get(ours) === rec;
    forward.set(rec, ours);
    backward.set(ours, rec);
    return true;
  };
  const count = (n: Normalisation) => {
    normalised[n] = (normalised[n] ?? 0) + 1;
    return true;
  };
  const sameString = (rec: string, ours: string, key: string): boolean => {
    if (rec === ours) return true;
    if (SECRET_KEYS.has(key) && !sentText.includes(JSON.stringify(rec))) return count('secret');
    if (ENDPOINT_KEYS.has(key) && rec.split(':')[0] === ours.split(':')[0]) return count('endpoint');
    if (WHOLE_UUID.test(rec) && WHOLE_UUID.test(ours)) return bind(rec, ours) && count('uuid');
    const [r, o] = [WHOLE_URI.exec(rec), WHOLE_URI.exec(ours)];
    if (r && o) return r[1] === o[1] && bind(r[2], o[2]) && count('resource_uri');
    if (WHOLE_TIME.test(rec) && WHOLE_TIME.test(ours)) return count('timestamp');
    if (WHOLE_MAC.test(rec) && WHOLE_MAC.test(ours)) return bind(rec, ours) && count('mac');
    if (WHOLE_IP.test(rec) && WHOLE_IP.test(ours)) return bind(rec, ours) && count('ip');
    return false;
  };
  const walk = (ours: unknown, rec: unknown, path: string) => {
    if (typeof rec === 'string' && typeof ours === 'string') {
      if (!sameString(rec, ours, path.slice(path.lastIndexOf('.') + 1))) out.push({ path, recorded: rec, ours });
    } else if (Array.isArray(rec) && Array.isArray(ours)) {
      if (rec.length !== ours.length) out.push({ path: `${path}.length`, recorded: rec.length, ours: ours.length });
      for (let i = 0; i < Math.min(rec.length, ours.length); i++) walk(ours[i], rec[i], `${path}[${i}]`);
    } else if (rec && ours && typeof rec === 'object' && typeof ours === 'object' && !Array.isArray(rec) && !Array.isArray(ours)) {
      const [r, o] = [rec as Record<string, unknown>, ours as Record<string, unknown>];
      for (const k of Object.keys(r).sort()) walk(k in o ? o[k] : ABSENT, r[k], `${path}.${k}`);
      for (const k of Object.keys(o).sort()) if (!(k in r)) out.push({ path: `${path}.${k}`, recorded: ABSENT, ours: o[k] });
    } else if (!Object.is(rec, ours)) out.push({ path, recorded: rec, ours });
  };
  walk(actual, recorded, '$');
  return out;
}

/** A key one side has and the other has not, as a difference shows it. */
export const ABSENT = '<absent>';
