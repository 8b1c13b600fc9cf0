import { isIP } from 'node:net';
import { validation } from '../../core/errors.js';
import { isPlainObject, type Obj } from '../../core/input.js';
import { parseIpCondition, parsePortCondition } from '../../core/firewall.js';
import { ACTIONS, ICMP_TYPES, PROTOCOLS } from './fields.js';

/**
 * A virtual-router firewall filter as the API takes it in (reference §14.2, dumps `request_vrfwfilter_create`,
 * `request_vrfwpolicy_update`, `request_vrfwpolicy_safe_update_valid_order`):
 *
 * - `action` allow|deny and `protocol` tcp|udp|icmp are required on create, as is `order` (an integer
 *   0–2147483647, unique within the policy: it decides which filter the router tries first). The recorded
 *   schema prints `action` as optional; a router cannot enforce a filter without one, so it is refused.
 * - `src`/`dst`: `""` (any) or an IPv4/IPv6 address, optionally with a prefix (`10.0.0.0/24`), kept as given
 *   (the recordings answer `"10.0.0.22"`, not a `/32` form). Negation is the operator's job, so a `!` here is
 *   refused; both addresses of one filter must be of one IP version.
 * - `src_port`/`dst_port`: `""` (any), a port or a range `from:to` (1–65535), answered as a string (`22` →
 *   `"22"`); ICMP has no ports, so an ICMP filter with a port is refused.
 * - `*_addr_op`, `*_port_op`: requests send `"="` / `"!="` (or booleans, as GET answers them); stored and
 *   answered as booleans (`"="` → true, `"!="` → false). Absent: true.
 * - `icmp_type`: null or one of the schema's choices. The recordings keep it on TCP filters
 *   (`safe_update_valid_order`), so it is accepted with any protocol; the router reads it for ICMP only.
 * - `log`: a boolean (default false); `action_queue`: a string or null, kept as given (always null in the
 *   recordings; Stratus gives it no meaning).
 *
 * A null means "not given" (as for every non-nullable field of the API); unknown and read-only keys
 * (`uuid`, `resource_uri`, `jobs`) are ignored. Errors are `validation` at `<prefix><field>`, the prefix
 * being `filters.N.` inside a policy and empty on `/vrfwfilters/`.
 */
export interface FilterValues {
  action: (typeof ACTIONS)[number];
  action_queue: string | null;
  dst: string;
  dst_addr_op: boolean;
  dst_port: string;
  dst_port_op: boolean;
  icmp_type: (typeof ICMP_TYPES)[number] | null;
  log: boolean;
  order: number;
  protocol: (typeof PROTOCOLS)[number];
  src: string;
  src_addr_op: boolean;
  src_port: string;
  src_port_op: boolean;
}

/** What a new filter is when a field is not given (the recorded schema's defaults). */
const DEFAULTS = {
  action_queue: null,
  dst: '',
  dst_addr_op: true,
  dst_port: '',
  dst_port_op: true,
  icmp_type: null,
  log: false,
  src: '',
  src_addr_op: true,
  src_port: '',
  src_port_op: true,
} satisfies Partial<FilterValues>;

const MAX_ORDER = 2_147_483_647;
const MAX_TEXT = 1024;

const given = (input: Obj, key: string): unknown => (Object.hasOwn(input, key) && input[key] !== null ? input[key] : undefined);

function choice<T extends string>(value: unknown, choices: readonly T[], point: string): T {
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value)) throw validation(point, `Value must be one of: ${choices.join(', ')}`);
  return value as T;
}

function operator(value: unknown, point: string): boolean {
  if (value === true || value === '=') return true;
  if (value === false || value === '!=') return false;
  throw validation(point, 'Value must be "=" or "!=" (or true / false)');
}

function address(value: unknown, point: string): string {
  if (typeof value !== 'string' || value.length > MAX_TEXT) throw validation(point, 'Value must be an IP address or network, or "" for any');
  const text = value.trim();
  if (text === '') return '';
  if (text.startsWith('!')) throw validation(point, `"${value}": negate with the ${point.replace(/.*\./, '')}_addr_op operator "!=", not with "!"`);
  const host = text.split('/')[0];
  if (isIP(host) === 0 || host.includes('%'))
    throw validation(point, `"${value}" is not an IP address or network (a.b.c.d, a.b.c.d/n or an IPv6 address with an optional /n)`);
  parseIpCondition(text, point); // the prefix (length or mask)
  return text;
}

function port(value: unknown, point: string): string {
  if (value === '') return '';
  if (typeof value === 'string' && value.trim() === '') return '';
  if (typeof value === 'string' && value.trim().startsWith('!')) throw validation(point, `"${value}": negate with the port operator "!=", not with "!"`);
  if ((typeof value !== 'string' || value.length > 32) && typeof value !== 'number')
    throw validation(point, 'Value must be a port (1-65535), a range from:to, or "" for any');
  return parsePortCondition(value, point).text;
}

function order(value: unknown, point: string): number {
  const n = typeof value === 'string' && /^\s*\d{1,10}\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_ORDER) throw validation(point, `Value must be an integer between 0 and ${MAX_ORDER}`);
  return n;
}

function bool(value: unknown, point: string): boolean {
  if (typeof value !== 'boolean') throw validation(point, 'Value must be a boolean');
  return value;
}

function text(value: unknown, point: string): string {
  if (typeof value !== 'string' || value.length > MAX_TEXT) throw validation(point, `Value must be a string of at most ${MAX_TEXT} characters`);
  return value;
}

/** Per field: how a given value is checked and normalised. */
const PARSERS: { [K in keyof FilterValues]: (value: unknown, point: string) => FilterValues[K] } = {
  action: (v, p) => choice(v, ACTIONS, p),
  action_queue: text,
  dst: address,
  dst_addr_op: operator,
  dst_port: port,
  dst_port_op: operator,
  icmp_type: (v, p) => choice(v, ICMP_TYPES, p),
  log: bool,
  order,
  protocol: (v, p) => choice(v, PROTOCOLS, p),
  src: address,
  src_addr_op: operator,
  src_port: port,
  src_port_op: operator,
};
const REQUIRED = ['action', 'order', 'protocol'] as const;

/**
 * One filter, validated: a new one (`base` absent: defaults fill the gaps, required fields must be given) or
 * a change of `base` (only the given fields change). Returns the whole filter.
 */
export function normaliseFilter(input: unknown, prefix: string, base?: FilterValues): FilterValues {
  if (!isPlainObject(input)) throw validation(prefix ? prefix.slice(0, -1) : null, 'A filter must be an object');
  const out: Partial<FilterValues> = base ? { ...base } : { ...DEFAULTS };
  for (const key of Object.keys(PARSERS) as (keyof FilterValues)[]) {
    const value = given(input, key);
    if (value === undefined) continue;
    (out as Record<string, unknown>)[key] = PARSERS[key](value, `${prefix}${key}`);
  }
  if (!base) for (const key of REQUIRED) if (out[key] === undefined) throw validation(`${prefix}${key}`, 'This field is required');
  const filter = out as FilterValues;
  if (filter.protocol === 'icmp')
    for (const key of ['src_port', 'dst_port'] as const)
      if (filter[key] !== '') throw validation(`${prefix}${key}`, 'An ICMP filter has no ports: give "" (any)');
  if (filter.src && filter.dst && isIP(filter.src.split('/')[0]) !== isIP(filter.dst.split('/')[0]))
    throw validation(`${prefix}dst`, 'src and dst must be of the same IP version');
  return filter;
}

/** Orders must be unique within a policy: the first filter (in `filters`) whose order another one took. */
export function duplicateOrder(filters: readonly { order: number }[]): number {
  const seen = new Set<number>();
  return filters.findIndex((f) => (seen.has(f.order) ? true : (seen.add(f.order), false)));
}
