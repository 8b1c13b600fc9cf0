/**
 * Rate-limit rules: what they look like to an operator, how they are validated, and how a request finds
 * the rules it counts against.
 *
 * One rule is written `METHOD[:PATH]=COUNT/PERIOD`, for example
 *
 *   GET=100/min   POST=100/min   POST:/servers/=500/day   PUT=100/min   DELETE=1000/min
 *
 * - METHOD is GET, POST, PUT, DELETE or `*` (every method). HEAD counts as GET; OPTIONS is never limited.
 * - PATH (optional) is a prefix of the path under `/api/2.0`, starting with `/`: `POST:/servers/` matches
 *   `POST /api/2.0/servers/`, `/api/2.0/servers/<uuid>/action/?do=start`, ... Without it the rule matches
 *   every path.
 * - COUNT is a whole number of requests (1 to 1e9); PERIOD is `sec`, `min`, `hour` or `day` (also `s`,
 *   `second`, `m`, `minute`, `h`, `d`). Windows are fixed and aligned to the clock (a minute window runs
 *   from :00 to :59, a day window is a UTC day).
 * - A list joins rules with commas. In an account override, `METHOD[:PATH]=off` removes that rule.
 *
 * A request counts against every rule it matches, so `POST /servers/` uses both the POST-per-minute and
 * the servers-per-day budget. A rule is identified by METHOD[:PATH]; an override rule with the same
 * identity replaces the deployment's, the others are inherited.
 */

export const METHODS = ['GET', 'POST', 'PUT', 'DELETE', '*'] as const;
export type RuleMethod = (typeof METHODS)[number];

export const PERIODS = { sec: 1_000, min: 60_000, hour: 3_600_000, day: 86_400_000 } as const;
export type Period = keyof typeof PERIODS;

const PERIOD_ALIASES: Record<string, Period> = {
  s: 'sec',
  sec: 'sec',
  second: 'sec',
  m: 'min',
  min: 'min',
  minute: 'min',
  h: 'hour',
  hour: 'hour',
  d: 'day',
  day: 'day',
};

export const MAX_COUNT = 1_000_000_000;
const MAX_RULES = 64;
const PATH_RE = /^\/[A-Za-z0-9._~\-/]*$/;

export interface Rule {
  method: RuleMethod;
  /** A path prefix under `/api/2.0`, or null for every path. */
  path: string | null;
  count: number;
  per: Period;
}

/** A rule in an account override: either a rule, or the removal of the inherited rule with that identity. */
export type OverrideRule = Rule | { method: RuleMethod; path: string | null; off: true };

/** Invalid rule text or file: the message says what is wrong and shows the expected form. */
export class RuleError extends Error {}

/** The spec's table ("Limits"), the default of every deployment. */
export const DEFAULT_RULES: readonly Rule[] = Object.freeze([
  { method: 'POST', path: null, count: 100, per: 'min' },
  { method: 'POST', path: '/servers/', count: 500, per: 'day' },
  { method: 'PUT', path: null, count: 100, per: 'min' },
  { method: 'GET', path: null, count: 100, per: 'min' },
  { method: 'DELETE', path: null, count: 1000, per: 'min' },
] satisfies Rule[]);

export const ruleId = (r: { method: RuleMethod; path: string | null }) => (r.path ? `${r.method}:${r.path}` : r.method);

export function formatRule(r: OverrideRule): string {
  return 'off' in r ? `${ruleId(r)}=off` : `${ruleId(r)}=${r.count}/${r.per}`;
}

export const formatRules = (rules: readonly OverrideRule[]) => rules.map(formatRule).join(',');

const FORM = 'expected METHOD[:PATH]=COUNT/PERIOD, e.g. GET=1000/min or POST:/servers/=500/day';

function parseIdentity(text: string, where: string): { method: RuleMethod; path: string | null } {
  const colon = text.indexOf(':');
  const method = (colon < 0 ? text : text.slice(0, colon)).trim().toUpperCase();
  if (!(METHODS as readonly string[]).includes(method)) throw new RuleError(`${where}: method "${method}" is not one of ${METHODS.join(', ')} (${FORM})`);
  let path: string | null = null;
  if (colon >= 0) {
    path = text.slice(colon + 1).trim();
    if (path.startsWith('/api/2.0/')) path = path.slice('/api/2.0'.length);
    if (!PATH_RE.test(path) || path.length > 200)
      throw new RuleError(`${where}: path "${path}" must start with "/" and contain only letters, digits and ._~-/ (${FORM})`);
  }
  return { method: method as RuleMethod, path };
}

function parseCount(raw: string, where: string): number {
  if (!/^\d+$/.test(raw)) throw new RuleError(`${where}: count "${raw}" is not a whole number (${FORM})`);
  const n = Number(raw);
  if (n < 1 || n > MAX_COUNT) throw new RuleError(`${where}: count must be between 1 and ${MAX_COUNT}, got ${raw}`);
  return n;
}

function parsePeriod(raw: string, where: string): Period {
  const p = PERIOD_ALIASES[raw.trim().toLowerCase()];
  if (!p) throw new RuleError(`${where}: period "${raw}" is not one of sec, min, hour, day (${FORM})`);
  return p;
}

/** One rule in text form; `allowOff` admits `METHOD[:PATH]=off` (account overrides only). */
export function parseRule(text: string, allowOff = false, where = `rule "${text}"`): OverrideRule {
  const eq = text.indexOf('=');
  if (eq < 0) throw new RuleError(`${where}: no "=" (${FORM})`);
  const id = parseIdentity(text.slice(0, eq), where);
  const value = text.slice(eq + 1).trim();
  if (value.toLowerCase() === 'off') {
    if (!allowOff) throw new RuleError(`${where}: "off" only removes an inherited rule in an account override`);
    return { ...id, off: true };
  }
  const slash = value.indexOf('/');
  if (slash < 0) throw new RuleError(`${where}: no "/PERIOD" (${FORM})`);
  return { ...id, count: parseCount(value.slice(0, slash).trim(), where), per: parsePeriod(value.slice(slash + 1), where) };
}

function noDuplicates<T extends { method: RuleMethod; path: string | null }>(rules: T[]): T[] {
  if (rules.length > MAX_RULES) throw new RuleError(`at most ${MAX_RULES} rules, got ${rules.length}`);
  const seen = new Set<string>();
  for (const r of rules) {
    const id = ruleId(r);
    if (seen.has(id)) throw new RuleError(`rule ${id} is given twice`);
    seen.add(id);
  }
  return rules;
}

/** A comma-separated list, as the `users limits --set` option takes it. */
export function parseRuleList(text: string, allowOff = false): OverrideRule[] {
  const parts = text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new RuleError(`no rules given (${FORM})`);
  return noDuplicates(parts.map((p) => parseRule(p, allowOff)));
}

/**
 * The deployment's rule file (`--rate-limits FILE`): a JSON array (or `{"rules": [...]}`) whose items are
 * rule strings (`"GET=100/min"`) or objects (`{"method": "POST", "path": "/servers/", "count": 500,
 * "per": "day"}`). It replaces the default table; `[]` means no limits.
 */
export function parseRuleJson(value: unknown): Rule[] {
  const list = Array.isArray(value) ? value : (value as { rules?: unknown })?.rules;
  if (!Array.isArray(list)) throw new RuleError('the rule file must hold a JSON array of rules, or an object {"rules": [...]}');
  return noDuplicates(
    list.map((item, i) => {
      const where = `rule ${i + 1}`;
      if (typeof item === 'string') return parseRule(item, false, `${where} ("${item}")`) as Rule;
      if (typeof item !== 'object' || item === null || Array.isArray(item))
        throw new RuleError(`${where}: must be a string like "GET=100/min" or an object {method, path?, count, per}`);
      const o = item as Record<string, unknown>;
      const unknown = Object.keys(o).filter((k) => !['method', 'path', 'count', 'per'].includes(k));
      if (unknown.length) throw new RuleError(`${where}: unknown key(s) ${unknown.join(', ')}; allowed: method, path, count, per`);
      if (typeof o.method !== 'string') throw new RuleError(`${where}: "method" must be a string`);
      if (o.path !== undefined && o.path !== null && typeof o.path !== 'string') throw new RuleError(`${where}: "path" must be a string`);
      if (typeof o.count !== 'number' && typeof o.count !== 'string') throw new RuleError(`${where}: "count" must be a number`);
      if (typeof o.per !== 'string') throw new RuleError(`${where}: "per" must be one of sec, min, hour, day`);
      const id = parseIdentity(o.path ? `${o.method}:${o.path}` : o.method, where);
      return { ...id, count: parseCount(String(o.count), where), per: parsePeriod(o.per, where) };
    }),
  );
}

/** The effective rules of an account: the deployment's, with the override's rules replacing or removing theirs. */
export function mergeRules(base: readonly Rule[], override: readonly OverrideRule[]): Rule[] {
  const byId = new Map<string, Rule>(base.map((r) => [ruleId(r), r]));
  for (const r of override) {
    if ('off' in r) byId.delete(ruleId(r));
    else byId.set(ruleId(r), r);
  }
  return [...byId.values()];
}

/** Rules grouped by method for the request path: `match` is a couple of array scans. */
export class RuleSet {
  private readonly byMethod = new Map<string, Rule[]>();

  constructor(readonly rules: readonly Rule[]) {
    for (const m of ['GET', 'POST', 'PUT', 'DELETE'])
      this.byMethod.set(
        m,
        rules.filter((r) => r.method === m || r.method === '*'),
      );
  }

  get empty(): boolean {
    return this.rules.length === 0;
  }

  /**
   * The rules a request counts against. `method` is the HTTP method (HEAD counts as GET; other methods,
   * OPTIONS included, match nothing); `path` is the path under `/api/2.0`, with or without the query.
   */
  match(method: string, path: string): Rule[] {
    const list = this.byMethod.get(method === 'HEAD' ? 'GET' : method);
    if (!list || list.length === 0) return [];
    if (list.every((r) => r.path === null)) return list;
    const q = path.indexOf('?');
    let p = q < 0 ? path : path.slice(0, q);
    if (!p.endsWith('/')) p += '/'; // `/servers` addresses the same resource as `/servers/`
    return list.filter((r) => r.path === null || p.startsWith(r.path));
  }
}

/** The path under `/api/2.0` of a request URL (`/api/2.0/servers/?x=1` -> `/servers/?x=1`). */
export const apiPath = (url: string) => (url.startsWith('/api/2.0/') ? url.slice('/api/2.0'.length) : url);
