import { isIPv4, isIPv6 } from 'node:net';
import { validation } from './errors.js';
import { isPlainObject } from './input.js';

/**
 * Firewall evaluation: what a policy's rules and the account's network restriction level do to one packet
 * on a server's public NIC. Pure functions, no store, no hardware (so in core/): the API side
 * (resources/fwpolicies) validates rules with the parsers here and records them; the simulated network
 * (sim/dhcp.ts) asks `evaluate` about packets, and so does a policy's `evaluate` action.
 *
 * A policy is an ordered rule list; the first rule that matches decides (`accept` or `drop`); no match
 * accepts. A rule matches when its direction is the packet's (or `both`), its `ip_proto` is null or the
 * packet's, and every condition it sets holds. A `!` negates its one condition only. Choices where the
 * documentation is silent, kept here so there is one place to change them:
 *
 * - **Address families.** A rule with an address condition belongs to that IP version and never matches
 *   a packet of the other one, negated or not: `!172.66.32.55` means "an IPv4 source other than
 *   172.66.32.55", as an iptables rule never sees IPv6 packets. IPv4-mapped IPv6 (`::ffff:a.b.c.d`) stands
 *   for the IPv4 address: a packet written that way is the IPv4 packet, and a rule network inside
 *   `::ffff:0:0/96` (prefix ≥ 96) matches as the IPv4 network it denotes. `::/0` is every IPv6 address.
 * - **Host bits.** A CIDR keeps the text it was given (`10.1.2.3/24` stays so, as netaddr's `IPNetwork`
 *   the real service shows signs of using keeps it) and matches its network (10.1.2.0–10.1.2.255).
 * - **Ports.** A port condition holds only for a packet that has that port: never for ICMP, negated or
 *   not (`!1:1024` does not match a ping). A port condition without `ip_proto` matches TCP and UDP.
 *
 * Restriction levels (docs "Default restrictions", spec Limits 3–6) apply to what the policy accepted,
 * outbound only: inbound traffic is the policy's business alone. Rate limits are reported, not counted.
 */

export type Verdict = 'accept' | 'drop';
export type Direction = 'in' | 'out' | 'both';

export interface FwRule {
  action: Verdict;
  direction: Direction;
  ip_proto: 'tcp' | 'udp' | null;
  src_ip: string | null;
  src_port: string | null;
  dst_ip: string | null;
  dst_port: string | null;
  comment: string | null;
}

export interface Packet {
  direction: 'in' | 'out';
  ip_proto: 'tcp' | 'udp' | 'icmp';
  src_ip: string;
  src_port: number | null;
  dst_ip: string;
  dst_port: number | null;
}

export const RESTRICTION_LEVELS = ['regular', 'no_outgoing_email', 'trial', 'guest'] as const;
export type RestrictionLevel = (typeof RESTRICTION_LEVELS)[number];

export interface RateLimit {
  pps: number;
  burst: number;
}

export interface PolicyResult {
  verdict: Verdict;
  /** Index of the rule that decided; null when none matched (default accept). */
  rule: number | null;
}

export interface LevelResult {
  verdict: Verdict;
  /** Which restriction dropped or limited the packet (one of RESTRICTION_REASONS); null when none applied. */
  reason: string | null;
  rate_limit: RateLimit | null;
}

export interface Evaluation {
  verdict: Verdict;
  /** The rule that matched (also when the level then dropped what it accepted); null when none did. */
  rule: number | null;
  level: RestrictionLevel;
  /** Who decided the verdict: a rule, the default accept, or the level dropping what the policy accepted. */
  decided_by: 'policy' | 'default' | 'restriction';
  reason: string | null;
  rate_limit: RateLimit | null;
}

// ---------------------------------------------------------------------------------------------------------
// Addresses

/** An address as a number: IPv4 as an unsigned 32-bit number, IPv6 as a 128-bit BigInt. */
export type Addr = { family: 4; value: number } | { family: 6; value: bigint };

/** A parsed `src_ip`/`dst_ip` condition. `family` is the IP version it applies to (mapped networks: 4). */
export interface IpCondition {
  negate: boolean;
  family: 4 | 6;
  /** The normalised text: `[!]address/prefix`, address as given (host bits kept), IPv6 in RFC 5952 form. */
  text: string;
  /** Whether the address (of the condition's family) is inside the network, before negation. */
  contains(addr: Addr): boolean;
}

const V6_ALL = (1n << 128n) - 1n;
const MAPPED_PREFIX = 0xffffn; // ::ffff:0:0/96, the upper 96 bits

const v4Value = (dotted: string): number => dotted.split('.').reduce((acc, octet) => acc * 256 + Number(octet), 0);
const v4Text = (value: number): string => [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');

function v6Value(text: string): bigint {
  const groups = (part: string): string[] => {
    if (part === '') return [];
    const list = part.split(':');
    const last = list[list.length - 1];
    if (last.includes('.')) {
      const v = v4Value(last);
      list.splice(-1, 1, (v >>> 16).toString(16), (v & 0xffff).toString(16));
    }
    return list;
  };
  const gap = text.indexOf('::');
  let all: string[];
  if (gap < 0) all = groups(text);
  else {
    const left = groups(text.slice(0, gap));
    const right = groups(text.slice(gap + 2));
    all = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  }
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** RFC 5952 text: lower case, the longest run (≥ 2) of zero groups as `::`, mapped IPv4 dotted. */
export function formatIPv6(value: bigint): string {
  if (value >> 32n === MAPPED_PREFIX) return `::ffff:${v4Text(Number(value & 0xffffffffn))}`;
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((value >> shift) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** One full address (no prefix, no `!`), or null. A mapped IPv6 address is its IPv4 address. */
function parseAddr(text: string): Addr | null {
  if (isIPv4(text)) return { family: 4, value: v4Value(text) };
  if (!isIPv6(text) || text.includes('%')) return null; // zone ids (fe80::1%eth0) name a link, not an address
  const value = v6Value(text);
  if (value >> 32n === MAPPED_PREFIX) return { family: 4, value: Number(value & 0xffffffffn) };
  return { family: 6, value };
}

const packetAddrs = new Map<string, Addr | null>();
/** Packet addresses repeat (the simulated network asks about the same peers over and over): parse once. */
function packetAddr(text: string): Addr | null {
  let addr = packetAddrs.get(text);
  if (addr === undefined) {
    if (packetAddrs.size >= 4096) packetAddrs.clear();
    addr = typeof text === 'string' ? parseAddr(text) : null;
    packetAddrs.set(text, addr);
  }
  return addr;
}

/** The prefix length a netmask (`255.255.255.0`) or, failing that, a hostmask (`0.0.0.255`) stands for. */
function maskPrefix(mask: bigint, width: number): number | null {
  const all = (1n << BigInt(width)) - 1n;
  const isLowOnes = (m: bigint) => (m & (m + 1n)) === 0n; // 0…01…1
  const ones = (m: bigint) => m.toString(2).replace(/0/g, '').length;
  if (isLowOnes(all ^ mask)) return ones(mask);
  if (isLowOnes(mask)) return width - ones(mask);
  return null;
}

/**
 * Parse an address condition: `[!]address[/prefix]`. Accepted: a full IPv4 or IPv6 address; an IPv4 with
 * fewer than four octets, padded with zero octets (`23` → `23.0.0.0`, `10.1/16` → `10.1.0.0/16`, the recorded
 * normalisation: netaddr's partial-address expansion); a prefix length (0–32, 0–128) or a mask in address
 * form (`/255.255.255.0`, or a hostmask `/0.0.0.255`), which becomes the length. Without a prefix the
 * condition is the host (`/32`, `/128`). Surrounding white space is ignored. Throws `validation(point, …)`.
 */
export function parseIpCondition(input: string, point: string): IpCondition {
  let text = input.trim();
  const negate = text.startsWith('!');
  if (negate) text = text.slice(1);
  const slash = text.indexOf('/');
  let address = slash < 0 ? text : text.slice(0, slash);
  const prefixText = slash < 0 ? null : text.slice(slash + 1);
  if (/^\d{1,3}(\.\d{1,3}){0,2}$/.test(address)) address += '.0'.repeat(4 - address.split('.').length);
  let family: 4 | 6;
  let value: bigint;
  if (isIPv4(address)) [family, value] = [4, BigInt(v4Value(address))];
  else if (isIPv6(address) && !address.includes('%')) [family, value] = [6, v6Value(address)];
  else throw validation(point, `"${input}" is not an IP address or network (a.b.c.d, a.b.c.d/n or an IPv6 address, with an optional "!")`);
  const width = family === 4 ? 32 : 128;
  let prefix = width;
  if (prefixText !== null) {
    if (/^\d{1,3}$/.test(prefixText)) prefix = Number(prefixText);
    else {
      const mask =
        family === 4 ? (isIPv4(prefixText) ? BigInt(v4Value(prefixText)) : null) : isIPv6(prefixText) && !prefixText.includes('%') ? v6Value(prefixText) : null;
      const fromMask = mask === null ? null : maskPrefix(mask, width);
      if (fromMask === null) throw validation(point, `"${input}" has an invalid prefix: give a length (0-${width}) or a network mask`);
      prefix = fromMask;
    }
    if (prefix > width) throw validation(point, `"${input}" has an invalid prefix: the length must be between 0 and ${width}`);
  }
  const shown = family === 4 ? v4Text(Number(value)) : formatIPv6(value);
  return condition(negate, family, value, prefix, `${negate ? '!' : ''}${shown}/${prefix}`);
}

function condition(negate: boolean, family: 4 | 6, value: bigint, prefix: number, text: string): IpCondition {
  if (family === 6 && prefix >= 96 && value >> 32n === MAPPED_PREFIX) return condition(negate, 4, value & 0xffffffffn, prefix - 96, text);
  if (family === 4) {
    // Shifts by 32 are no-ops in JS: /0 gets an explicit zero mask.
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    const net = (Number(value) & mask) >>> 0;
    return { negate, family, text, contains: (a) => a.family === 4 && (a.value & mask) >>> 0 === net };
  }
  const mask = (V6_ALL << BigInt(128 - prefix)) & V6_ALL;
  const net = value & mask;
  return { negate, family, text, contains: (a) => a.family === 6 && (a.value & mask) === net };
}

// ---------------------------------------------------------------------------------------------------------
// Ports

export interface PortCondition {
  negate: boolean;
  from: number;
  to: number;
  /** The normalised text: `[!]port` or `[!]from:to`, numbers without leading zeros. */
  text: string;
}

const PORT_TEXT = /^(!?)(\d{1,5})(?::(\d{1,5}))?$/;

/**
 * Parse a port condition: a port (`22`, or the number 22), a range `from:to` (inclusive, from ≤ to), either
 * with an optional `!` prefix (strings only). Ports are 1–65535. Throws `validation(point, …)`.
 */
export function parsePortCondition(input: string | number, point: string): PortCondition {
  if (typeof input === 'number') {
    if (!Number.isInteger(input) || input < 1 || input > 65535) throw validation(point, `${input} is not a port (1-65535)`);
    return { negate: false, from: input, to: input, text: String(input) };
  }
  const m = PORT_TEXT.exec(input.trim());
  if (!m) throw validation(point, `"${input}" is not a port or port range (22, 1:1024, with an optional "!")`);
  const from = Number(m[2]);
  const to = m[3] === undefined ? from : Number(m[3]);
  if (from < 1 || to < 1 || from > 65535 || to > 65535) throw validation(point, `"${input}": ports are between 1 and 65535`);
  if (from > to) throw validation(point, `"${input}": a range starts at its lower port`);
  const negate = m[1] === '!';
  return { negate, from, to, text: `${negate ? '!' : ''}${from}${m[3] === undefined ? '' : `:${to}`}` };
}

// ---------------------------------------------------------------------------------------------------------
// Rules and policies

interface CompiledRule {
  action: Verdict;
  in: boolean;
  out: boolean;
  proto: 'tcp' | 'udp' | null;
  family: 4 | 6 | null;
  src: IpCondition | null;
  dst: IpCondition | null;
  srcPort: PortCondition | null;
  dstPort: PortCondition | null;
}

const byObject = new WeakMap<FwRule, CompiledRule>();
const byText = new Map<string, CompiledRule>();
const MAX_BY_TEXT = 10_000;

/** A rule parsed once: by object while the caller keeps it, by its text across re-read copies. */
function compiled(rule: FwRule, index: number): CompiledRule {
  let c = byObject.get(rule);
  if (c) return c;
  const key = `${rule.action}|${rule.direction}|${rule.ip_proto}|${rule.src_ip}|${rule.src_port}|${rule.dst_ip}|${rule.dst_port}`;
  c = byText.get(key);
  if (!c) {
    c = compile(rule, `rules.${index}`);
    if (byText.size >= MAX_BY_TEXT) byText.clear();
    byText.set(key, c);
  }
  byObject.set(rule, c);
  return c;
}

function compile(rule: FwRule, point: string): CompiledRule {
  if (rule.action !== 'accept' && rule.action !== 'drop') throw validation(`${point}.action`, 'Value must be one of: drop, accept');
  if (!['in', 'out', 'both'].includes(rule.direction)) throw validation(`${point}.direction`, 'Value must be one of: in, out, both');
  if (rule.ip_proto !== null && rule.ip_proto !== 'tcp' && rule.ip_proto !== 'udp') throw validation(`${point}.ip_proto`, 'Value must be one of: tcp, udp');
  const src = rule.src_ip ? parseIpCondition(rule.src_ip, `${point}.src_ip`) : null;
  const dst = rule.dst_ip ? parseIpCondition(rule.dst_ip, `${point}.dst_ip`) : null;
  if (src && dst && src.family !== dst.family) throw validation(`${point}.dst_ip`, 'src_ip and dst_ip must be of the same IP version');
  return {
    action: rule.action,
    in: rule.direction !== 'out',
    out: rule.direction !== 'in',
    proto: rule.ip_proto,
    family: src?.family ?? dst?.family ?? null,
    src,
    dst,
    srcPort: rule.src_port ? parsePortCondition(rule.src_port, `${point}.src_port`) : null,
    dstPort: rule.dst_port ? parsePortCondition(rule.dst_port, `${point}.dst_port`) : null,
  };
}

/** Parsed packet fields the matcher needs. */
interface PacketFacts {
  packet: Packet;
  src: Addr;
  dst: Addr;
}

function facts(packet: Packet): PacketFacts {
  const src = packetAddr(packet.src_ip);
  if (!src) throw validation('src_ip', `"${packet.src_ip}" is not an IP address`);
  const dst = packetAddr(packet.dst_ip);
  if (!dst) throw validation('dst_ip', `"${packet.dst_ip}" is not an IP address`);
  if (src.family !== dst.family) throw validation('dst_ip', 'src_ip and dst_ip must be of the same IP version');
  return { packet, src, dst };
}

const ipHolds = (c: IpCondition, a: Addr) => c.contains(a) !== c.negate;
const portHolds = (c: PortCondition, port: number | null) => port !== null && (port >= c.from && port <= c.to) !== c.negate;

function matches(r: CompiledRule, f: PacketFacts): boolean {
  const p = f.packet;
  if (!(p.direction === 'in' ? r.in : r.out)) return false;
  if (r.proto !== null && r.proto !== p.ip_proto) return false;
  if (r.family !== null && r.family !== f.src.family) return false;
  if (r.src && !ipHolds(r.src, f.src)) return false;
  if (r.dst && !ipHolds(r.dst, f.dst)) return false;
  const ported = p.ip_proto === 'tcp' || p.ip_proto === 'udp';
  if (r.srcPort && !(ported && portHolds(r.srcPort, p.src_port))) return false;
  if (r.dstPort && !(ported && portHolds(r.dstPort, p.dst_port))) return false;
  return true;
}

function policyOn(rules: readonly FwRule[], f: PacketFacts): PolicyResult {
  for (let i = 0; i < rules.length; i++) {
    const r = compiled(rules[i], i);
    if (matches(r, f)) return { verdict: r.action, rule: i };
  }
  return { verdict: 'accept', rule: null };
}

/** The policy's verdict on a packet: the first matching rule's action, else accept (`rule: null`). */
export function evaluatePolicy(rules: readonly FwRule[], packet: Packet): PolicyResult {
  return policyOn(rules, facts(packet));
}

// ---------------------------------------------------------------------------------------------------------
// Restriction levels

export const BROADCAST_LIMIT: RateLimit = Object.freeze({ pps: 5, burst: 100 });
export const MULTICAST_LIMIT: RateLimit = Object.freeze({ pps: 10, burst: 100 });
/** Outbound TCP to these is dropped for `no_outgoing_email` (SMTP, SMTPS, submission). */
export const EMAIL_PORTS: readonly number[] = [25, 465, 587];
/** Outbound TCP/UDP to these is dropped for `trial` and `guest`. */
export const TRIAL_PORTS: readonly number[] = [22, 23, 25, 7777, 43594, 43595, 25565];
/**
 * What `guest` may still send: ICMP, DHCP requests (UDP to 67/68), DNS (UDP/TCP 53) and TCP 80/443. The
 * docs say "send requests to TCP port 80 and 443", so UDP 80/443 (QUIC) stays blocked.
 */
export const GUEST_ALLOWED = { udp: [53, 67, 68], tcp: [53, 80, 443] } as const;

/** The `reason` texts, one per restriction. */
export const RESTRICTION_REASONS = {
  broadcast: 'broadcast traffic is limited to 5 packets per second, burst 100',
  multicast: 'multicast traffic is limited to 10 packets per second, burst 100',
  email: 'outgoing e-mail (TCP 25, 465, 587) is blocked',
  trialPorts: 'outgoing connections to ports 22, 23, 25, 7777, 43594, 43595 and 25565 are blocked',
  guest: 'only ICMP, DHCP, DNS and TCP 80/443 may be sent',
} as const;

const emailPorts = new Set(EMAIL_PORTS);
const trialPorts = new Set(TRIAL_PORTS);
const guestUdp = new Set<number>(GUEST_ALLOWED.udp);
const guestTcp = new Set<number>(GUEST_ALLOWED.tcp);

const V4_BROADCAST = 0xffffffff;
const V6_ALL_NODES = v6Value('ff02::1');

function levelOn(level: RestrictionLevel, f: PacketFacts): LevelResult {
  if (!RESTRICTION_LEVELS.includes(level)) throw validation('level', `Value must be one of: ${RESTRICTION_LEVELS.join(', ')}`);
  const p = f.packet;
  const ok: LevelResult = { verdict: 'accept', reason: null, rate_limit: null };
  if (p.direction !== 'out') return ok;
  const drop = (reason: string): LevelResult => ({ verdict: 'drop', reason, rate_limit: null });
  const port = p.ip_proto === 'icmp' ? null : p.dst_port;
  if (level === 'no_outgoing_email' && p.ip_proto === 'tcp' && port !== null && emailPorts.has(port)) return drop(RESTRICTION_REASONS.email);
  if (level === 'trial' || level === 'guest') {
    if (port !== null && trialPorts.has(port)) return drop(RESTRICTION_REASONS.trialPorts);
  }
  if (level === 'guest') {
    const allowed = p.ip_proto === 'icmp' || (port !== null && (p.ip_proto === 'udp' ? guestUdp : guestTcp).has(port));
    if (!allowed) return drop(RESTRICTION_REASONS.guest);
  }
  const d = f.dst;
  if (d.family === 4 ? d.value === V4_BROADCAST : d.value === V6_ALL_NODES)
    return { verdict: 'accept', reason: RESTRICTION_REASONS.broadcast, rate_limit: BROADCAST_LIMIT };
  if (d.family === 4 ? d.value >>> 28 === 0xe : d.value >> 120n === 0xffn)
    return { verdict: 'accept', reason: RESTRICTION_REASONS.multicast, rate_limit: MULTICAST_LIMIT };
  return ok;
}

/**
 * What a restriction level does to a packet the policy let through: drops (outbound only) with the reason,
 * or accepts, with the rate limit that applies to outbound broadcast (255.255.255.255, ff02::1) and
 * multicast (224.0.0.0/4, ff00::/8) at every level.
 */
export function evaluateLevel(level: RestrictionLevel, packet: Packet): LevelResult {
  return levelOn(level, facts(packet));
}

/**
 * The whole verdict: the policy first (a drop there is final), then the level's restrictions on what it
 * accepted. A rate-limited packet is accepted and keeps `decided_by` policy/default, with `rate_limit` set.
 */
export function evaluate(rules: readonly FwRule[], level: RestrictionLevel, packet: Packet): Evaluation {
  const f = facts(packet);
  const policy = policyOn(rules, f);
  if (policy.verdict === 'drop') return { verdict: 'drop', rule: policy.rule, level, decided_by: 'policy', reason: null, rate_limit: null };
  const restricted = levelOn(level, f);
  return {
    verdict: restricted.verdict,
    rule: policy.rule,
    level,
    decided_by: restricted.verdict === 'drop' ? 'restriction' : policy.rule === null ? 'default' : 'policy',
    reason: restricted.reason,
    rate_limit: restricted.rate_limit,
  };
}

/** The level for an account state: REGULAR → regular, TRIAL → trial, GUEST, NEW_USER and NEW → guest; any other (unknown) state gets the strictest, guest. `no_outgoing_email` is chosen per account, not by state. */
export function restrictionLevelOf(userState: string): RestrictionLevel {
  switch (userState.toUpperCase()) {
    case 'REGULAR':
      return 'regular';
    case 'TRIAL':
      return 'trial';
    default:
      return 'guest';
  }
}

// ---------------------------------------------------------------------------------------------------------
// Packets from the API

function packetPort(body: Record<string, unknown>, name: 'src_port' | 'dst_port', proto: Packet['ip_proto']): number | null {
  const value = body[name];
  const absent = value === undefined || value === null || value === '';
  if (proto === 'icmp') {
    if (!absent) throw validation(name, 'ICMP packets have no ports');
    return null;
  }
  if (absent) {
    if (name === 'dst_port') throw validation(name, 'This field is required for TCP and UDP packets');
    return null;
  }
  const n = typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65535) throw validation(name, 'Value must be a port between 1 and 65535');
  return n;
}

function packetAddress(body: Record<string, unknown>, name: 'src_ip' | 'dst_ip'): { text: string; addr: Addr } {
  const value = body[name];
  if (value === undefined || value === null || value === '') throw validation(name, 'This field is required');
  const addr = typeof value === 'string' ? parseAddr(value.trim()) : null;
  if (!addr) throw validation(name, 'Value must be an IPv4 or IPv6 address');
  return { text: addr.family === 4 ? v4Text(addr.value) : formatIPv6(addr.value), addr };
}

/**
 * Validate a packet body (the `evaluate` action): `direction` in|out, `ip_proto` tcp|udp|icmp, `src_ip` and
 * `dst_ip` full addresses of one IP version (mapped IPv6 becomes IPv4; IPv6 is returned in RFC 5952 form),
 * `dst_port` required and `src_port` optional (null) for TCP/UDP, both absent for ICMP; ports as numbers or
 * numeric strings, 1–65535. Unknown keys are ignored. Throws `validation(point, …)`.
 */
export function parsePacket(input: unknown): Packet {
  if (!isPlainObject(input)) throw validation(null, 'A packet must be an object');
  const { direction, ip_proto } = input;
  if (direction !== 'in' && direction !== 'out') throw validation('direction', 'Value must be one of: in, out');
  if (ip_proto !== 'tcp' && ip_proto !== 'udp' && ip_proto !== 'icmp') throw validation('ip_proto', 'Value must be one of: tcp, udp, icmp');
  const src = packetAddress(input, 'src_ip');
  const dst = packetAddress(input, 'dst_ip');
  if (src.addr.family !== dst.addr.family) throw validation('dst_ip', 'src_ip and dst_ip must be of the same IP version');
  return {
    direction,
    ip_proto,
    src_ip: src.text,
    src_port: packetPort(input, 'src_port', ip_proto),
    dst_ip: dst.text,
    dst_port: packetPort(input, 'dst_port', ip_proto),
  };
}
