import { BlockList, isIP } from 'node:net';

/**
 * Where webhooks may go. A webhook is a request this service makes for a user to a URL the user chose, so
 * without a check it reaches whatever this host reaches: its own loopback services, the private network,
 * the cloud's metadata endpoint (SSRF), and its error tells an open port from a closed one (a port scanner).
 * Only public unicast addresses are allowed, unless the operator allows private ones for local development
 * (`--webhooks-allow-private`).
 *
 * Two checks use this module: the URL's text when a webhook is created or changed (a literal address or a
 * name that can only be local is refused at once; no DNS there, a name may change what it resolves to), and
 * the address actually connected to, at delivery (webhook.ts resolves through a guarded lookup). Host text is
 * read by the WHATWG URL parser, which already turns `127.1`, `2130706433`, `0x7f.1` and `0177.0.0.1` into
 * `127.0.0.1`, so the text check sees what the connection would.
 */

/** IPv4 ranges that are not public unicast (IANA special-purpose registry, multicast, reserved). */
const V4_NOT_PUBLIC: [string, number][] = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // CGNAT (also Alibaba's metadata, 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address 255.255.255.255
];

/** IPv6: only global unicast (2000::/3) can be public, minus these special blocks within it. */
const V6_SPECIAL_IN_GLOBAL: [string, number][] = [
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking 2001:2::/48, ORCHID
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
];

const v4NotPublic = new BlockList();
for (const [net, bits] of V4_NOT_PUBLIC) v4NotPublic.addSubnet(net, bits, 'ipv4');
const v6Global = new BlockList();
v6Global.addSubnet('2000::', 3, 'ipv6');
const v6Special = new BlockList();
for (const [net, bits] of V6_SPECIAL_IN_GLOBAL) v6Special.addSubnet(net, bits, 'ipv6');
// IPv6 forms that carry an IPv4 address in their last 32 bits and reach it: IPv4-mapped and NAT64.
const v6EmbedsV4Last = new BlockList();
v6EmbedsV4Last.addSubnet('::ffff:0:0', 96, 'ipv6');
v6EmbedsV4Last.addSubnet('64:ff9b::', 96, 'ipv6');
const v6SixToFour = new BlockList();
v6SixToFour.addSubnet('2002::', 16, 'ipv6');

/** The eight 16-bit groups of a valid IPv6 address (a trailing dotted quad counts as two). */
function v6Groups(ip: string): number[] {
  let text = ip;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number);
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill('0');
  return [...h, ...fill, ...t].map((g) => parseInt(g, 16));
}

const v4Of = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/** Whether an IP address (v4 or v6 text) is public unicast; anything that is not an address is not public. */
export function isPublicAddress(address: string): boolean {
  const ip = address.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) names a link: the address decides
  const family = isIP(ip);
  if (family === 4) return !v4NotPublic.check(ip, 'ipv4');
  if (family !== 6) return false;
  if (v6EmbedsV4Last.check(ip, 'ipv6')) {
    const g = v6Groups(ip);
    return isPublicAddress(v4Of(g[6], g[7]));
  }
  if (v6SixToFour.check(ip, 'ipv6')) {
    const g = v6Groups(ip);
    return isPublicAddress(v4Of(g[1], g[2]));
  }
  return v6Global.check(ip, 'ipv6') && !v6Special.check(ip, 'ipv6');
}

/** Names that only ever mean this host or its private network (RFC 6761 `localhost`, `.internal`, mDNS `.local`). */
const LOCAL_NAME = /(^|\.)(localhost|internal|local)$|^metadata(\.goog)?$/;

/** A URL's host as a resolver sees it: no IPv6 brackets, no trailing root dot, lower case. */
export function bareHost(hostname: string): string {
  return hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.+$/, '')
    .toLowerCase();
}

/** Whether a URL's host text is already known not to be public: a non-public literal address, or a local-only name. */
export function isLocalHostText(hostname: string): boolean {
  const host = bareHost(hostname);
  if (isIP(host)) return !isPublicAddress(host);
  return host === '' || LOCAL_NAME.test(host);
}

export const INVALID_URL = 'Enter a valid http:// or https:// URL';
export const CREDENTIALS_IN_URL = 'The URL must not contain a user name or password';
export const PRIVATE_DESTINATION = 'Webhooks cannot be sent to private, loopback, link-local or metadata addresses';

/**
 * A webhook URL read and checked on its text: http(s), no credentials (they would be sent and shown back),
 * and unless `allowPrivate`, a host that is not known to be local. Returns the URL, or why it is refused.
 */
export function checkWebhookUrl(text: string, allowPrivate: boolean): { url: URL } | { refused: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { refused: INVALID_URL };
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) return { refused: INVALID_URL };
  if (url.username || url.password) return { refused: CREDENTIALS_IN_URL };
  if (!allowPrivate && isLocalHostText(url.hostname)) return { refused: PRIVATE_DESTINATION };
  return { url };
}
