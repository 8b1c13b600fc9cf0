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
