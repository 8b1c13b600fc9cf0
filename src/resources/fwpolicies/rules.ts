import { validation } from '../../core/errors.js';
import { isPlainObject, type Obj } from '../../core/input.js';
import { parseIpCondition, parsePortCondition, type FwRule } from '../../core/firewall.js';

/**
 * A firewall policy's `rules` as the API takes them in: validated and brought to the form the real service
 * answers with (docs fwpolicies.rst, dumps `fwpolicy_create_full`/`_get`/`_update`, libcloud fixtures):
 *
 * - every rule has exactly the eight keys `action, comment, direction, dst_ip, dst_port, ip_proto, src_ip,
 *   src_port`; unset ones are null, and an empty string counts as unset; unknown keys (`uuid`, whatever a
 *   client sends back) are ignored;
 * - `action` (drop|accept) and `direction` (in|out|both) are required, `ip_proto` is tcp|udp or null — the
 *   schema's choices, exact;
 * - addresses come back as `[!]address/prefix`: a bare address gets the host length (`/32`, `/128`), an
 *   IPv4 with fewer than four octets is padded with zero octets (`"23"` → `"23.0.0.0/32"`, as recorded), a
 *   mask in address form becomes its length, a CIDR with host bits set is kept as given (the docs' own
 *   example is `192.168.1.1/24`), IPv6 is written in RFC 5952 form; `src_ip` and `dst_ip` of one rule must
 *   be of one IP version (such a rule could never match);
 * - ports are `[!]port` or `[!]from:to` (1–65535, from ≤ to); a number is taken as that port and returned
 *   as a string;
 * - a port on a rule without `ip_proto` is accepted and kept (nothing recorded says the service refuses it;
 *   the evaluator then matches TCP and UDP on it);
 * - `comment` is a string or null.
 *
 * Errors are `validation` with `error_point` `rules` (not a list), `rules.N` (not an object) or
 * `rules.N.<field>`.
 */

const CHOICES = {
  action: ['drop', 'accept'],
  direction: ['in', 'out', 'both'],
  ip_proto: ['tcp', 'udp'],
} as const;

const unset = (v: unknown) => v === undefined || v === null || v === '';

function choice<K extends keyof typeof CHOICES>(rule: Obj, key: K, point: string, required: boolean): (typeof CHOICES)[K][number] | null {
  const value = rule[key];
  if (unset(value)) {
    if (required) throw validation(`${point}.${key}`, 'This field is required');
    return null;
  }
  if (!(CHOICES[key] as readonly unknown[]).includes(value)) throw validation(`${point}.${key}`, `Value must be one of: ${CHOICES[key].join(', ')}`);
  return value as (typeof CHOICES)[K][number];
}

function text(rule: Obj, key: string, point: string): string | null {
  const value = rule[key];
  if (unset(value)) return null;
  if (typeof value !== 'string') throw validation(`${point}.${key}`, 'Value must be a string');
  return value;
}

function port(rule: Obj, key: 'src_port' | 'dst_port', point: string): string | null {
  const value = rule[key];
  if (unset(value)) return null;
  if (typeof value !== 'string' && typeof value !== 'number') throw validation(`${point}.${key}`, 'Value must be a port or a port range');
  return parsePortCondition(value, `${point}.${key}`).text;
}

/** One rule, validated and normalised; `point` names it in errors (`rules.2`). */
export function normaliseRule(input: unknown, point: string): FwRule {
  if (!isPlainObject(input)) throw validation(point, 'A rule must be an object');
  const action = choice(input, 'action', point, true)!;
  const direction = choice(input, 'direction', point, true)!;
  const ip_proto = choice(input, 'ip_proto', point, false);
  const srcText = text(input, 'src_ip', point);
  const dstText = text(input, 'dst_ip', point);
  const src = srcText === null ? null : parseIpCondition(srcText, `${point}.src_ip`);
  const dst = dstText === null ? null : parseIpCondition(dstText, `${point}.dst_ip`);
  if (src && dst && src.family !== dst.family) throw validation(`${point}.dst_ip`, 'src_ip and dst_ip must be of the same IP version');
  return {
    action,
    comment: text(input, 'comment', point),
    direction,
    dst_ip: dst?.text ?? null,
    dst_port: port(input, 'dst_port', point),
    ip_proto,
    src_ip: src?.text ?? null,
    src_port: port(input, 'src_port', point),
  };
}

/** A policy's `rules` (null or absent: none), in order, each normalised. */
export function normaliseRules(input: unknown): FwRule[] {
  if (input === undefined || input === null) return [];
  if (!Array.isArray(input)) throw validation('rules', 'Value must be a list of rules');
  return input.map((rule, i) => normaliseRule(rule, `rules.${i}`));
}
