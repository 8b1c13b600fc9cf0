/**
 * The public IPv4 address pool of this location, from configuration (`--ip-pool`, `--nameservers`).
 * A pool entry is a CIDR block with a gateway; its usable addresses are every host address except the
 * network, broadcast and gateway addresses. Parsing throws `PoolError` with a message naming the setting.
 */
export interface IpPoolBlock {
  /** As configured, e.g. `185.12.6.0/24`. */
  cidr: string;
  /** Network address as an unsigned 32-bit integer. */
  network: number;
  /** CIDR prefix length: the IP's `netmask` (8..30). */
  prefix: number;
  gateway: string;
}

export class PoolError extends Error {}

export const DEFAULT_IP_POOL = '185.12.6.0/24';
/** The nameservers the recorded API shows. */
export const DEFAULT_NAMESERVERS = '69.194.139.62,178.22.66.167,178.22.71.56';

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export const isIpv4 = (s: string): boolean => IPV4.test(s);

export function ipToInt(ip: string): number {
  return ip.split('.').reduce((n, octet) => n * 256 + Number(octet), 0);
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

const size = (b: IpPoolBlock) => 2 ** (32 - b.prefix);

/** `CIDR[@GATEWAY]` entries separated by commas; the gateway defaults to the first host address. */
export function parseIpPool(raw: string): IpPoolBlock[] {
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (!entries.length) throw new PoolError('ip-pool must name at least one CIDR block, e.g. 185.12.6.0/24');
  const blocks: IpPoolBlock[] = [];
  for (const entry of entries) {
    const m = /^([\d.]+)\/(\d{1,2})(?:@([\d.]+))?$/.exec(entry);
    if (!m || !isIpv4(m[1])) throw new PoolError(`ip-pool: "${entry}" is not CIDR[@GATEWAY], e.g. 185.12.6.0/24 or 185.12.6.0/24@185.12.6.1`);
    const prefix = Number(m[2]);
    if (prefix < 8 || prefix > 30) throw new PoolError(`ip-pool: "${entry}": the prefix must be between /8 and /30`);
    const network = ipToInt(m[1]);
    const block = { cidr: `${m[1]}/${prefix}`, network, prefix, gateway: '' };
    if (network % size(block) !== 0)
      throw new PoolError(`ip-pool: "${entry}" has host bits set; did you mean ${intToIp(network - (network % size(block)))}/${prefix}?`);
    const gateway = m[3] ?? intToIp(network + 1);
    if (!isIpv4(gateway)) throw new PoolError(`ip-pool: "${entry}": gateway ${gateway} is not an IPv4 address`);
    const g = ipToInt(gateway);
    if (g <= network || g >= network + size(block) - 1) throw new PoolError(`ip-pool: "${entry}": gateway ${gateway} is not a host address of the block`);
    block.gateway = gateway;
    for (const other of blocks)
      if (network < other.network + size(other) && other.network < network + size(block)) throw new PoolError(`ip-pool: ${block.cidr} overlaps ${other.cidr}`);
    blocks.push(block);
  }
  return blocks;
}

export function parseNameservers(raw: string): string[] {
  const list = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const ns of list) if (!isIpv4(ns)) throw new PoolError(`nameservers: "${ns}" is not an IPv4 address`);
  return list;
}

/** Every usable address of the pool, in order (lazily: a /8 is 16 million). */
export function* poolAddresses(pool: readonly IpPoolBlock[]): Generator<string> {
  for (const b of pool) {
    const g = ipToInt(b.gateway);
    for (let n = b.network + 1; n < b.network + size(b) - 1; n++) if (n !== g) yield intToIp(n);
  }
}

/** How many usable addresses the pool has. */
export const poolSize = (pool: readonly IpPoolBlock[]): number => pool.reduce((n, b) => n + size(b) - 3, 0);

/** The pool block an address belongs to, if any. */
export function blockOf(pool: readonly IpPoolBlock[], address: string): IpPoolBlock | undefined {
  if (!isIpv4(address)) return undefined;
  const n = ipToInt(address);
  return pool.find((b) => n >= b.network && n < b.network + size(b));
}
