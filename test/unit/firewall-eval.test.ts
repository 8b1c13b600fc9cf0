import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BROADCAST_LIMIT,
  evaluate,
  evaluateLevel,
  evaluatePolicy,
  MULTICAST_LIMIT,
  parsePacket,
  RESTRICTION_REASONS as WHY,
  restrictionLevelOf,
  TRIAL_PORTS,
  type FwRule,
  type Packet,
  type RestrictionLevel,
} from '../../src/core/firewall.js';
import { golden } from '../helpers/golden.js';
import { validationFailure } from '../helpers/errors.js';

// ---------------------------------------------------------------------------------------------------------
// Notation

/** A rule: drop, both directions, nothing else set, unless `fields` says otherwise. */
const R = (fields: Partial<FwRule> = {}): FwRule => ({
  action: 'drop',
  direction: 'both',
  ip_proto: null,
  src_ip: null,
  src_port: null,
  dst_ip: null,
  dst_port: null,
  comment: null,
  ...fields,
});

/** One end of a packet: `1.2.3.4`, `1.2.3.4:80`, `[2001:db8::1]`, `[2001:db8::1]:80`. */
function end(text: string): [string, number | null] {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(text) ?? /^([^:]+)(?::(\d+))?$/.exec(text);
  assert.ok(m, `bad packet end ${text}`);
  return [m[1], m[2] === undefined ? null : Number(m[2])];
}

/** A packet: `in tcp 1.2.3.4:1000 > 10.0.0.1:22` (direction, protocol, source > destination). */
function P(text: string): Packet {
  const m = /^(in|out) (tcp|udp|icmp) (\S+) > (\S+)$/.exec(text);
  assert.ok(m, `bad packet ${text}`);
  const [src_ip, src_port] = end(m[3]);
  const [dst_ip, dst_port] = end(m[4]);
  return { direction: m[1] as Packet['direction'], ip_proto: m[2] as Packet['ip_proto'], src_ip, src_port, dst_ip, dst_port };
}

const failure = validationFailure;

// ---------------------------------------------------------------------------------------------------------
// One rule against one packet: [rule fields, packet, does the rule match]. The rule drops, so a match is
// {drop, rule 0} and no match the default {accept, null}.

type MatchCase = [Partial<FwRule>, string, boolean];

const CIDR_V4: MatchCase[] = [
  [{ src_ip: '0.0.0.0/0' }, 'in tcp 0.0.0.0:1 > 10.0.0.1:22', true],
  [{ src_ip: '0.0.0.0/0' }, 'in tcp 255.255.255.255:1 > 10.0.0.1:22', true],
  [{ src_ip: '10.1.2.3/0' }, 'in udp 198.51.100.7:1 > 10.0.0.1:53', true],
  [{ src_ip: '10.0.0.1/32' }, 'in tcp 10.0.0.1:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.1/32' }, 'in tcp 10.0.0.2:1 > 10.0.0.9:22', false],
  [{ src_ip: '10.0.0.1/32' }, 'in tcp 10.0.0.0:1 > 10.0.0.9:22', false],
  [{ src_ip: '10.0.0.1' }, 'in tcp 10.0.0.1:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.0/31' }, 'in tcp 10.0.0.0:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.0/31' }, 'in tcp 10.0.0.1:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.0/31' }, 'in tcp 10.0.0.2:1 > 10.0.0.9:22', false],
  [{ src_ip: '10.0.0.2/31' }, 'in tcp 10.0.0.1:1 > 10.0.0.9:22', false],
  [{ src_ip: '10.0.0.2/31' }, 'in tcp 10.0.0.3:1 > 10.0.0.9:22', true],
  [{ src_ip: '192.168.1.0/24' }, 'in tcp 192.168.1.0:1 > 10.0.0.9:22', true],
  [{ src_ip: '192.168.1.0/24' }, 'in tcp 192.168.1.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '192.168.1.0/24' }, 'in tcp 192.168.0.255:1 > 10.0.0.9:22', false],
  [{ src_ip: '192.168.1.0/24' }, 'in tcp 192.168.2.0:1 > 10.0.0.9:22', false],
  [{ src_ip: '192.168.1.128/25' }, 'in tcp 192.168.1.127:1 > 10.0.0.9:22', false],
  [{ src_ip: '192.168.1.128/25' }, 'in tcp 192.168.1.128:1 > 10.0.0.9:22', true],
  [{ src_ip: '192.168.1.128/25' }, 'in tcp 192.168.1.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp 10.255.255.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp 11.0.0.0:1 > 10.0.0.9:22', false],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp 9.255.255.255:1 > 10.0.0.9:22', false],
  [{ src_ip: '128.0.0.0/1' }, 'in tcp 127.255.255.255:1 > 10.0.0.9:22', false],
  [{ src_ip: '128.0.0.0/1' }, 'in tcp 128.0.0.0:1 > 10.0.0.9:22', true],
  [{ src_ip: '128.0.0.0/1' }, 'in tcp 255.255.255.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '0.0.0.0/1' }, 'in tcp 127.255.255.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '0.0.0.0/1' }, 'in tcp 128.0.0.0:1 > 10.0.0.9:22', false],
  [{ src_ip: '255.255.255.254/31' }, 'in tcp 255.255.255.255:1 > 10.0.0.9:22', true],
  [{ src_ip: '255.255.255.254/31' }, 'in tcp 255.255.255.253:1 > 10.0.0.9:22', false],
  // host bits set: the network is what matches
  [{ src_ip: '10.1.2.3/24' }, 'in tcp 10.1.2.200:1 > 10.0.0.9:22', true],
  [{ src_ip: '10.1.2.3/24' }, 'in tcp 10.1.3.3:1 > 10.0.0.9:22', false],
  // the recorded partial address: 23.0.0.0/32, nothing else
  [{ dst_ip: '23.0.0.0/32' }, 'out tcp 10.0.0.9:1 > 23.0.0.0:80', true],
  [{ dst_ip: '23.0.0.0/32' }, 'out tcp 10.0.0.9:1 > 23.0.0.1:80', false],
  [{ dst_ip: '23.0.0.0/32' }, 'out tcp 10.0.0.9:1 > 0.0.0.23:80', false],
  [{ dst_ip: '23' }, 'out tcp 10.0.0.9:1 > 23.0.0.0:80', true],
  // a mask in address form is its length
  [{ dst_ip: '172.16.0.0/255.240.0.0' }, 'out tcp 10.0.0.9:1 > 172.31.255.255:80', true],
  [{ dst_ip: '172.16.0.0/255.240.0.0' }, 'out tcp 10.0.0.9:1 > 172.32.0.0:80', false],
  [{ dst_ip: '172.16.0.0/12' }, 'out tcp 10.0.0.9:1 > 172.15.255.255:80', false],
  // dst conditions look at the destination, src at the source
  [{ dst_ip: '10.0.0.0/8' }, 'in tcp 10.0.0.1:1 > 192.0.2.1:22', false],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp 192.0.2.1:1 > 10.0.0.1:22', false],
  // both set: both must hold
  [{ src_ip: '10.0.0.0/8', dst_ip: '192.0.2.0/24' }, 'in tcp 10.9.9.9:1 > 192.0.2.77:22', true],
  [{ src_ip: '10.0.0.0/8', dst_ip: '192.0.2.0/24' }, 'in tcp 10.9.9.9:1 > 192.0.3.77:22', false],
  [{ src_ip: '10.0.0.0/8', dst_ip: '192.0.2.0/24' }, 'in tcp 11.9.9.9:1 > 192.0.2.77:22', false],
];

const NEGATED_ADDRESSES: MatchCase[] = [
  [{ src_ip: '!10.0.0.0/8' }, 'in tcp 11.0.0.1:1 > 192.0.2.1:22', true],
  [{ src_ip: '!10.0.0.0/8' }, 'in tcp 10.5.5.5:1 > 192.0.2.1:22', false],
  [{ src_ip: '!10.0.0.0/8' }, 'in tcp 10.0.0.0:1 > 192.0.2.1:22', false],
  [{ src_ip: '!10.0.0.0/8' }, 'in tcp 9.255.255.255:1 > 192.0.2.1:22', true],
  [{ src_ip: '!172.66.32.55/32' }, 'in udp 172.66.32.55:1 > 192.0.2.1:53', false],
  [{ src_ip: '!172.66.32.55/32' }, 'in udp 172.66.32.56:1 > 192.0.2.1:53', true],
  [{ src_ip: '!0.0.0.0/0' }, 'in udp 1.2.3.4:1 > 192.0.2.1:53', false],
  [{ dst_ip: '!192.0.2.0/24' }, 'out tcp 10.0.0.1:1 > 192.0.2.9:443', false],
  [{ dst_ip: '!192.0.2.0/24' }, 'out tcp 10.0.0.1:1 > 198.51.100.9:443', true],
  // a negation negates its own condition only
  [{ src_ip: '!10.0.0.0/8', dst_ip: '192.0.2.0/24' }, 'in tcp 11.0.0.1:1 > 192.0.2.1:22', true],
  [{ src_ip: '!10.0.0.0/8', dst_ip: '192.0.2.0/24' }, 'in tcp 11.0.0.1:1 > 192.0.3.1:22', false],
  // an IPv4 condition, negated or not, never matches IPv6 packets; nor IPv6 ones IPv4 packets
  [{ src_ip: '!172.66.32.55/32' }, 'in udp [2001:db8::1]:1 > [2001:db8::2]:53', false],
  [{ src_ip: '!0.0.0.0/0' }, 'in udp [2001:db8::1]:1 > [2001:db8::2]:53', false],
  [{ src_ip: '!2001:db8::/32' }, 'in udp 1.2.3.4:1 > 10.0.0.1:53', false],
  [{ src_ip: '!2001:db8::/32' }, 'in udp [2001:db9::1]:1 > [2001:db8::2]:53', true],
  [{ src_ip: '!2001:db8::/32' }, 'in udp [2001:db8:ffff::1]:1 > [2001:db8::2]:53', false],
];

const PORTS: MatchCase[] = [
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:22', true],
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:21', false],
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:23', false],
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in tcp 1.2.3.4:22 > 10.0.0.1:5000', false],
  [{ ip_proto: 'tcp', dst_port: '1000:2000' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:999', false],
  [{ ip_proto: 'tcp', dst_port: '1000:2000' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1000', true],
  [{ ip_proto: 'tcp', dst_port: '1000:2000' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1500', true],
  [{ ip_proto: 'tcp', dst_port: '1000:2000' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:2000', true],
  [{ ip_proto: 'tcp', dst_port: '1000:2000' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:2001', false],
  [{ ip_proto: 'tcp', dst_port: '22:22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:22', true],
  [{ ip_proto: 'tcp', dst_port: '22:22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:23', false],
  [{ ip_proto: 'udp', dst_port: '1:65535' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:1', true],
  [{ ip_proto: 'udp', dst_port: '1:65535' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:65535', true],
  [{ ip_proto: 'udp', dst_port: '65535' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:65535', true],
  [{ ip_proto: 'udp', dst_port: '65535' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:65534', false],
  [{ ip_proto: 'udp', dst_port: '1' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:1', true],
  [{ ip_proto: 'udp', dst_port: '1' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:2', false],
  // negated ports
  [{ ip_proto: 'tcp', dst_port: '!22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:22', false],
  [{ ip_proto: 'tcp', dst_port: '!22' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:21', true],
  [{ ip_proto: 'tcp', dst_port: '!1:1024' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1', false],
  [{ ip_proto: 'tcp', dst_port: '!1:1024' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1024', false],
  [{ ip_proto: 'tcp', dst_port: '!1:1024' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1025', true],
  [{ ip_proto: 'tcp', dst_port: '!1:1024' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:65535', true],
  [{ ip_proto: 'tcp', dst_port: '!1:65535' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:8080', false],
  // source ports
  [{ ip_proto: 'udp', src_port: '53' }, 'in udp 1.2.3.4:53 > 10.0.0.1:40000', true],
  [{ ip_proto: 'udp', src_port: '53' }, 'in udp 1.2.3.4:40000 > 10.0.0.1:53', false],
  [{ ip_proto: 'udp', src_port: '!1024:65535' }, 'in udp 1.2.3.4:1023 > 10.0.0.1:53', true],
  [{ ip_proto: 'udp', src_port: '!1024:65535' }, 'in udp 1.2.3.4:1024 > 10.0.0.1:53', false],
  // both ports must hold
  [{ ip_proto: 'tcp', src_port: '1024:65535', dst_port: '80' }, 'in tcp 1.2.3.4:1024 > 10.0.0.1:80', true],
  [{ ip_proto: 'tcp', src_port: '1024:65535', dst_port: '80' }, 'in tcp 1.2.3.4:1023 > 10.0.0.1:80', false],
  [{ ip_proto: 'tcp', src_port: '1024:65535', dst_port: '80' }, 'in tcp 1.2.3.4:1024 > 10.0.0.1:81', false],
  // a port condition never matches a packet without ports (ICMP), negated or not
  [{ dst_port: '22' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ dst_port: '!22' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ src_port: '!1:1024' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ dst_port: '!1:65535' }, 'out icmp 10.0.0.1 > 1.2.3.4', false],
  // ... nor a TCP packet whose source port is unknown
  [{ ip_proto: 'tcp', src_port: '!22' }, 'in tcp 1.2.3.4 > 10.0.0.1:80', false],
  // a port condition without ip_proto matches TCP and UDP
  [{ dst_port: '53' }, 'in udp 1.2.3.4:5000 > 10.0.0.1:53', true],
  [{ dst_port: '53' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:53', true],
  [{ dst_port: '53' }, 'in tcp 1.2.3.4:5000 > 10.0.0.1:54', false],
];

const V6: MatchCase[] = [
  [{ src_ip: '2001:db8::1/128' }, 'in tcp [2001:db8::1]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '2001:db8::1/128' }, 'in tcp [2001:db8::2]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '2001:db8::1/128' }, 'in tcp [2001:db8::]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '2001:db8::1' }, 'in tcp [2001:0DB8:0:0:0:0:0:1]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '2001:db8:0:1::/64' }, 'in tcp [2001:db8:0:1::]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '2001:db8:0:1::/64' }, 'in tcp [2001:db8:0:1:ffff:ffff:ffff:ffff]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '2001:db8:0:1::/64' }, 'in tcp [2001:db8:0:2::]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '2001:db8:0:1::/64' }, 'in tcp [2001:db8:0:0:ffff:ffff:ffff:ffff]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '2001:db8:0:1::/127' }, 'in tcp [2001:db8:0:1::1]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '2001:db8:0:1::/127' }, 'in tcp [2001:db8:0:1::2]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '::/0' }, 'in tcp [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '::/0' }, 'in tcp [::]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '::/0' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', false],
  [{ src_ip: '0.0.0.0/0' }, 'in tcp [2001:db8::1]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '::' }, 'in tcp [::]:1 > [2001:db8::9]:22', true],
  [{ src_ip: '::' }, 'in tcp [::1]:1 > [2001:db8::9]:22', false],
  [{ dst_ip: '::1' }, 'in tcp [::1]:1 > [::1]:22', true],
  [{ dst_ip: 'fe80::/10' }, 'in tcp [::1]:1 > [febf:ffff::1]:22', true],
  [{ dst_ip: 'fe80::/10' }, 'in tcp [::1]:1 > [fec0::1]:22', false],
  [{ dst_ip: '8000::/1' }, 'in tcp [::1]:1 > [7fff:ffff::]:22', false],
  [{ dst_ip: '8000::/1' }, 'in tcp [::1]:1 > [8000::]:22', true],
  [{ dst_ip: '2001:db8::/ffff:ffff::' }, 'in tcp [::1]:1 > [2001:db8:ffff::1]:22', true],
  // IPv4-mapped forms stand for the IPv4 address
  [{ src_ip: '::ffff:10.0.0.0/104' }, 'in tcp 10.2.3.4:1 > 192.0.2.1:22', true],
  [{ src_ip: '::ffff:10.0.0.0/104' }, 'in tcp 11.0.0.1:1 > 192.0.2.1:22', false],
  [{ src_ip: '::ffff:0:0/96' }, 'in tcp 203.0.113.5:1 > 192.0.2.1:22', true],
  [{ src_ip: '::ffff:0:0/96' }, 'in tcp [2001:db8::1]:1 > [2001:db8::9]:22', false],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp [::ffff:10.1.1.1]:1 > [::ffff:192.0.2.1]:22', true],
  [{ src_ip: '10.0.0.0/8' }, 'in tcp [::ffff:a01:101]:1 > 192.0.2.1:22', true],
  [{ src_ip: '2001:db8::/32' }, 'in tcp [::ffff:10.1.1.1]:1 > 192.0.2.1:22', false],
  [{ src_ip: '!::ffff:10.0.0.1' }, 'in tcp 10.0.0.2:1 > 192.0.2.1:22', true],
  [{ src_ip: '!::ffff:10.0.0.1' }, 'in tcp 10.0.0.1:1 > 192.0.2.1:22', false],
  // a rule with only ports or a protocol applies to both versions
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in tcp [2001:db8::1]:1 > [2001:db8::9]:22', true],
  [{ ip_proto: 'udp' }, 'in udp [2001:db8::1]:1 > [2001:db8::9]:53', true],
  [{}, 'in icmp [2001:db8::1] > [2001:db8::9]', true],
];

const DIRECTIONS: MatchCase[] = [
  [{ direction: 'in' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', true],
  [{ direction: 'in' }, 'out tcp 10.0.0.1:1 > 1.2.3.4:22', false],
  [{ direction: 'out' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', false],
  [{ direction: 'out' }, 'out tcp 10.0.0.1:1 > 1.2.3.4:22', true],
  [{ direction: 'both' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', true],
  [{ direction: 'both' }, 'out tcp 10.0.0.1:1 > 1.2.3.4:22', true],
  [{ direction: 'in' }, 'in icmp 1.2.3.4 > 10.0.0.1', true],
  [{ direction: 'out' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ direction: 'both' }, 'out udp [2001:db8::1]:1 > [2001:db8::9]:53', true],
  [{ direction: 'in', src_ip: '1.2.3.4' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', true],
  [{ direction: 'out', src_ip: '1.2.3.4' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', false],
  [{ direction: 'out', dst_ip: '1.2.3.4' }, 'out tcp 10.0.0.1:1 > 1.2.3.4:22', true],
];

const PROTOCOLS: MatchCase[] = [
  [{ ip_proto: null }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', true],
  [{ ip_proto: null }, 'in udp 1.2.3.4:1 > 10.0.0.1:53', true],
  [{ ip_proto: null }, 'in icmp 1.2.3.4 > 10.0.0.1', true],
  [{ ip_proto: 'tcp' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:22', true],
  [{ ip_proto: 'tcp' }, 'in udp 1.2.3.4:1 > 10.0.0.1:22', false],
  [{ ip_proto: 'tcp' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ ip_proto: 'udp' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:53', false],
  [{ ip_proto: 'udp' }, 'in udp 1.2.3.4:1 > 10.0.0.1:53', true],
  [{ ip_proto: 'udp' }, 'in icmp 1.2.3.4 > 10.0.0.1', false],
  [{ ip_proto: null, src_ip: '1.2.3.0/24' }, 'in icmp 1.2.3.4 > 10.0.0.1', true],
  [{ ip_proto: 'udp', src_ip: '1.2.3.0/24' }, 'in tcp 1.2.3.4:1 > 10.0.0.1:53', false],
  [{ ip_proto: 'tcp', dst_port: '22' }, 'in udp 1.2.3.4:1 > 10.0.0.1:22', false],
];

const MATCH_TABLES: Record<string, MatchCase[]> = {
  'IPv4 CIDR edges': CIDR_V4,
  'negated addresses': NEGATED_ADDRESSES,
  'ports and ranges': PORTS,
  IPv6: V6,
  directions: DIRECTIONS,
  protocols: PROTOCOLS,
};

// ---------------------------------------------------------------------------------------------------------
// Whole policies: [rules, packet, verdict, deciding rule]

type PolicyCase = [FwRule[], string, 'accept' | 'drop', number | null];

/** The recorded "My awesome policy" (dump response_fwpolicy_get). */
const AWESOME: FwRule[] = golden('response_fwpolicy_get').rules;

const ORDERING: PolicyCase[] = [
  [[], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', null],
  [[], 'out icmp 10.0.0.1 > 1.2.3.4', 'accept', null],
  [[R({ action: 'accept' }), R()], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', 0],
  [[R(), R({ action: 'accept' })], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'drop', 0],
  [[R({ action: 'accept', ip_proto: 'tcp', dst_port: '22' }), R()], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', 0],
  [[R({ action: 'accept', ip_proto: 'tcp', dst_port: '22' }), R()], 'in tcp 1.2.3.4:1 > 10.0.0.1:23', 'drop', 1],
  [[R({ action: 'accept', ip_proto: 'tcp', dst_port: '22' }), R()], 'in udp 1.2.3.4:1 > 10.0.0.1:22', 'drop', 1],
  // a broader earlier rule shadows a narrower later one
  [[R({ src_ip: '10.0.0.0/8' }), R({ action: 'accept', src_ip: '10.1.0.0/16' })], 'in tcp 10.1.2.3:1 > 192.0.2.1:22', 'drop', 0],
  [[R({ action: 'accept', src_ip: '10.1.0.0/16' }), R({ src_ip: '10.0.0.0/8' })], 'in tcp 10.1.2.3:1 > 192.0.2.1:22', 'accept', 0],
  [[R({ action: 'accept', src_ip: '10.1.0.0/16' }), R({ src_ip: '10.0.0.0/8' })], 'in tcp 10.2.2.3:1 > 192.0.2.1:22', 'drop', 1],
  [[R({ action: 'accept', src_ip: '10.1.0.0/16' }), R({ src_ip: '10.0.0.0/8' })], 'in tcp 11.2.2.3:1 > 192.0.2.1:22', 'accept', null],
  [[R({ direction: 'out' }), R({ direction: 'in', action: 'accept' }), R()], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', 1],
  [[R({ direction: 'out' }), R({ direction: 'out', action: 'accept' }), R({ ip_proto: 'udp' })], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', null],
  [[R({ ip_proto: 'udp' }), R({ dst_port: '80' }), R({ src_ip: '1.2.3.4' }), R()], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'drop', 2],
  [[R({ ip_proto: 'udp' }), R({ dst_port: '80' }), R({ src_ip: '1.2.3.5' }), R({ action: 'accept' })], 'in tcp 1.2.3.4:1 > 10.0.0.1:22', 'accept', 3],
  // the recorded policy
  [AWESOME, 'in tcp 172.66.32.10:5000 > 10.0.0.1:22', 'accept', 1],
  [AWESOME, 'in tcp 172.66.33.10:5000 > 10.0.0.1:22', 'drop', 2],
  [AWESOME, 'in tcp 8.8.8.8:5000 > 10.0.0.1:22', 'drop', 2],
  [AWESOME, 'in udp 1.2.3.4:5000 > 10.0.0.1:53', 'drop', 3],
  [AWESOME, 'in udp 172.66.32.55:5000 > 10.0.0.1:53', 'accept', null],
  [AWESOME, 'in tcp 1.2.3.4:5000 > 10.0.0.1:8080', 'drop', 4],
  [AWESOME, 'in tcp 1.2.3.4:5000 > 10.0.0.1:80', 'accept', null],
  [AWESOME, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1024', 'accept', null],
  [AWESOME, 'in tcp 1.2.3.4:5000 > 10.0.0.1:1025', 'drop', 4],
  [AWESOME, 'out tcp 10.0.0.1:5000 > 23.0.0.0:80', 'drop', 0],
  [AWESOME, 'out tcp 10.0.0.1:5000 > 23.0.0.1:80', 'accept', null],
  [AWESOME, 'out udp 10.0.0.1:5000 > 1.2.3.4:53', 'accept', null],
  [AWESOME, 'in icmp 1.2.3.4 > 10.0.0.1', 'accept', null],
  [AWESOME, 'in udp [2001:db8::1]:5000 > [2001:db8::9]:53', 'accept', null],
  [AWESOME, 'in tcp [2001:db8::1]:5000 > [2001:db8::9]:22', 'drop', 2],
];

// ---------------------------------------------------------------------------------------------------------
// Restriction levels: [level, packet, verdict, reason, rate limit]

type LevelCase = [RestrictionLevel, string, 'accept' | 'drop', string | null, { pps: number; burst: number } | null];

const VM = '10.0.0.1:40000';
const VM6 = '[2001:db8::1]:40000';
const B = BROADCAST_LIMIT;
const M = MULTICAST_LIMIT;

const LEVELS: LevelCase[] = [
  // regular: only broadcast and multicast limits, outbound
  ['regular', `out tcp ${VM} > 1.2.3.4:25`, 'accept', null, null],
  ['regular', `out tcp ${VM} > 1.2.3.4:22`, 'accept', null, null],
  ['regular', `out udp ${VM} > 255.255.255.255:67`, 'accept', WHY.broadcast, B],
  ['regular', `out icmp 10.0.0.1 > 255.255.255.255`, 'accept', WHY.broadcast, B],
  ['regular', `out udp ${VM} > 255.255.255.254:67`, 'accept', null, null],
  ['regular', `out udp ${VM} > 224.0.0.1:5353`, 'accept', WHY.multicast, M],
  ['regular', `out udp ${VM} > 239.255.255.255:5353`, 'accept', WHY.multicast, M],
  ['regular', `out udp ${VM} > 223.255.255.255:5353`, 'accept', null, null],
  ['regular', `out udp ${VM} > 240.0.0.0:5353`, 'accept', null, null],
  ['regular', `out udp ${VM6} > [ff02::1]:547`, 'accept', WHY.broadcast, B],
  ['regular', `out udp ${VM6} > [ff02::2]:547`, 'accept', WHY.multicast, M],
  ['regular', `out udp ${VM6} > [ff05::1:3]:547`, 'accept', WHY.multicast, M],
  ['regular', `out udp ${VM6} > [feff:ffff::1]:547`, 'accept', null, null],
  ['regular', `out udp ${VM6} > [fe80::1]:547`, 'accept', null, null],
  ['regular', `in udp 1.2.3.4:67 > 255.255.255.255:68`, 'accept', null, null],
  ['regular', `in udp 1.2.3.4:5353 > 224.0.0.251:5353`, 'accept', null, null],
  // no_outgoing_email: regular + TCP 25, 465, 587 out
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:25`, 'drop', WHY.email, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:465`, 'drop', WHY.email, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:587`, 'drop', WHY.email, null],
  ['no_outgoing_email', `out tcp ${VM6} > [2001:db8::25]:587`, 'drop', WHY.email, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:24`, 'accept', null, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:26`, 'accept', null, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:466`, 'accept', null, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:588`, 'accept', null, null],
  ['no_outgoing_email', `out tcp ${VM} > 1.2.3.4:22`, 'accept', null, null],
  ['no_outgoing_email', `out udp ${VM} > 1.2.3.4:25`, 'accept', null, null],
  ['no_outgoing_email', `out tcp 10.0.0.1:25 > 1.2.3.4:40000`, 'accept', null, null],
  ['no_outgoing_email', `in tcp 1.2.3.4:40000 > 10.0.0.1:25`, 'accept', null, null],
  ['no_outgoing_email', `out udp ${VM} > 255.255.255.255:67`, 'accept', WHY.broadcast, B],
  // trial: regular + the port list, TCP and UDP, out
  ...TRIAL_PORTS.flatMap((port): LevelCase[] => [
    ['trial', `out tcp ${VM} > 1.2.3.4:${port}`, 'drop', WHY.trialPorts, null],
    ['trial', `out udp ${VM} > 1.2.3.4:${port}`, 'drop', WHY.trialPorts, null],
  ]),
  ...[21, 24, 26, 7776, 7778, 43593, 43596, 25564, 25566, 465, 587, 80, 443, 3306].map((port): LevelCase => [
    'trial',
    `out tcp ${VM} > 1.2.3.4:${port}`,
    'accept',
    null,
    null,
  ]),
  ['trial', `out tcp ${VM6} > [2001:db8::9]:22`, 'drop', WHY.trialPorts, null],
  ['trial', `out tcp 10.0.0.1:22 > 1.2.3.4:40000`, 'accept', null, null],
  ['trial', `in tcp 1.2.3.4:40000 > 10.0.0.1:22`, 'accept', null, null],
  ['trial', `out icmp 10.0.0.1 > 1.2.3.4`, 'accept', null, null],
  ['trial', `out udp ${VM} > 255.255.255.255:67`, 'accept', WHY.broadcast, B],
  ['trial', `out udp ${VM} > 224.0.0.9:520`, 'accept', WHY.multicast, M],
  ['trial', `out udp ${VM} > 224.0.0.9:23`, 'drop', WHY.trialPorts, null],
  // guest: trial + only ICMP, DHCP, DNS and TCP 80/443 out
  ['guest', `out icmp 10.0.0.1 > 1.2.3.4`, 'accept', null, null],
  ['guest', `out icmp [2001:db8::1] > [2001:db8::9]`, 'accept', null, null],
  ['guest', `out udp 10.0.0.1:68 > 1.2.3.4:67`, 'accept', null, null],
  ['guest', `out udp ${VM} > 1.2.3.4:68`, 'accept', null, null],
  ['guest', `out udp ${VM} > 1.2.3.4:66`, 'drop', WHY.guest, null],
  ['guest', `out udp ${VM} > 1.2.3.4:69`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:67`, 'drop', WHY.guest, null],
  ['guest', `out udp ${VM} > 8.8.8.8:53`, 'accept', null, null],
  ['guest', `out tcp ${VM} > 8.8.8.8:53`, 'accept', null, null],
  ['guest', `out udp ${VM6} > [2001:4860:4860::8888]:53`, 'accept', null, null],
  ['guest', `out udp ${VM} > 8.8.8.8:52`, 'drop', WHY.guest, null],
  ['guest', `out udp ${VM} > 8.8.8.8:54`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:80`, 'accept', null, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:443`, 'accept', null, null],
  ['guest', `out tcp ${VM6} > [2001:db8::9]:443`, 'accept', null, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:79`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:81`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:442`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:444`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:8080`, 'drop', WHY.guest, null],
  ['guest', `out udp ${VM} > 1.2.3.4:80`, 'drop', WHY.guest, null],
  ['guest', `out udp ${VM} > 1.2.3.4:443`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:465`, 'drop', WHY.guest, null],
  ['guest', `out tcp ${VM} > 1.2.3.4:22`, 'drop', WHY.trialPorts, null],
  ['guest', `out udp ${VM} > 1.2.3.4:25565`, 'drop', WHY.trialPorts, null],
  ['guest', `out tcp 10.0.0.1:80 > 1.2.3.4:40000`, 'drop', WHY.guest, null],
  ['guest', `in tcp 1.2.3.4:40000 > 10.0.0.1:3306`, 'accept', null, null],
  ['guest', `in udp 1.2.3.4:40000 > 10.0.0.1:22`, 'accept', null, null],
  ['guest', `out udp 10.0.0.1:68 > 255.255.255.255:67`, 'accept', WHY.broadcast, B],
  ['guest', `out udp ${VM} > 224.0.0.251:5353`, 'drop', WHY.guest, null],
  ['guest', `out icmp 10.0.0.1 > 224.0.0.1`, 'accept', WHY.multicast, M],
  ['guest', `out icmp [2001:db8::1] > [ff02::1]`, 'accept', WHY.broadcast, B],
];

// ---------------------------------------------------------------------------------------------------------
// Policy and level together: [rules, level, packet, expected]

type CombinedCase = [FwRule[], RestrictionLevel, string, Partial<ReturnType<typeof evaluate>>];

const COMBINED: CombinedCase[] = [
  // the policy's drop is final: no level decides, no rate limit
  [
    [R({ ip_proto: 'tcp', dst_port: '80' })],
    'guest',
    `out tcp ${VM} > 1.2.3.4:80`,
    { verdict: 'drop', rule: 0, decided_by: 'policy', reason: null, rate_limit: null },
  ],
  [[R({ direction: 'out' })], 'regular', `out udp ${VM} > 255.255.255.255:67`, { verdict: 'drop', rule: 0, decided_by: 'policy', rate_limit: null }],
  [[R({ direction: 'in' })], 'trial', `in tcp 1.2.3.4:1 > 10.0.0.1:80`, { verdict: 'drop', rule: 0, decided_by: 'policy' }],
  // the policy accepts, the level drops
  [
    [R({ action: 'accept', ip_proto: 'tcp', dst_port: '22' })],
    'trial',
    `out tcp ${VM} > 1.2.3.4:22`,
    { verdict: 'drop', rule: 0, decided_by: 'restriction', reason: WHY.trialPorts },
  ],
  [[R({ action: 'accept' })], 'guest', `out tcp ${VM} > 1.2.3.4:8080`, { verdict: 'drop', rule: 0, decided_by: 'restriction', reason: WHY.guest }],
  [[], 'guest', `out tcp ${VM} > 1.2.3.4:8080`, { verdict: 'drop', rule: null, decided_by: 'restriction', reason: WHY.guest }],
  [[], 'no_outgoing_email', `out tcp ${VM} > 1.2.3.4:587`, { verdict: 'drop', rule: null, decided_by: 'restriction', reason: WHY.email }],
  [[R({ direction: 'in' })], 'trial', `out tcp ${VM} > 1.2.3.4:23`, { verdict: 'drop', rule: null, decided_by: 'restriction' }],
  // the policy accepts and so does the level
  [[], 'regular', `out tcp ${VM} > 1.2.3.4:22`, { verdict: 'accept', rule: null, decided_by: 'default', reason: null, rate_limit: null }],
  [[R({ action: 'accept', dst_ip: '1.2.3.4' })], 'regular', `out tcp ${VM} > 1.2.3.4:22`, { verdict: 'accept', rule: 0, decided_by: 'policy', reason: null }],
  [[R({ action: 'accept' })], 'guest', `out tcp ${VM} > 1.2.3.4:443`, { verdict: 'accept', rule: 0, decided_by: 'policy' }],
  [[], 'guest', `in tcp 1.2.3.4:1 > 10.0.0.1:3306`, { verdict: 'accept', rule: null, decided_by: 'default' }],
  [[R({ direction: 'out', dst_port: '80' })], 'guest', `out tcp ${VM} > 1.2.3.4:443`, { verdict: 'accept', rule: null, decided_by: 'default' }],
  // rate limits ride along with an accept
  [[], 'regular', `out udp ${VM} > 255.255.255.255:67`, { verdict: 'accept', rule: null, decided_by: 'default', reason: WHY.broadcast, rate_limit: B }],
  [
    [R({ action: 'accept', dst_ip: '224.0.0.0/4' })],
    'trial',
    `out udp ${VM} > 239.1.2.3:5000`,
    { verdict: 'accept', rule: 0, decided_by: 'policy', rate_limit: M },
  ],
  [[R({ action: 'accept', dst_ip: 'ff00::/8' })], 'regular', `out udp ${VM6} > [ff02::1]:5000`, { verdict: 'accept', rule: 0, rate_limit: B }],
  // the recorded policy under each level
  [AWESOME, 'guest', `out tcp ${VM} > 23.0.0.0:80`, { verdict: 'drop', rule: 0, decided_by: 'policy', reason: null }],
  [AWESOME, 'guest', `out tcp ${VM} > 23.0.0.1:80`, { verdict: 'accept', rule: null, decided_by: 'default' }],
  [AWESOME, 'trial', `in tcp 172.66.32.9:1 > 10.0.0.1:22`, { verdict: 'accept', rule: 1, decided_by: 'policy' }],
  [AWESOME, 'trial', `out tcp ${VM} > 172.66.32.9:22`, { verdict: 'drop', rule: null, decided_by: 'restriction', reason: WHY.trialPorts }],
];

const STATES: [string, RestrictionLevel][] = [
  ['REGULAR', 'regular'],
  ['TRIAL', 'trial'],
  ['GUEST', 'guest'],
  ['NEW_USER', 'guest'],
  ['NEW', 'guest'],
  ['INACTIVE', 'guest'],
  ['SOMETHING_NEW', 'guest'],
  ['regular', 'regular'],
  ['Trial', 'trial'],
];

// ---------------------------------------------------------------------------------------------------------
// Packets from the API: [body, parsed packet] and [body, error point]

const PACKETS_OK: [unknown, Packet][] = [
  [
    { direction: 'in', ip_proto: 'tcp', src_ip: '1.2.3.4', src_port: 40000, dst_ip: '10.0.0.1', dst_port: 22 },
    { direction: 'in', ip_proto: 'tcp', src_ip: '1.2.3.4', src_port: 40000, dst_ip: '10.0.0.1', dst_port: 22 },
  ],
  [
    { direction: 'out', ip_proto: 'udp', src_ip: '10.0.0.1', dst_ip: '8.8.8.8', dst_port: '53', extra: true },
    { direction: 'out', ip_proto: 'udp', src_ip: '10.0.0.1', src_port: null, dst_ip: '8.8.8.8', dst_port: 53 },
  ],
  [
    { direction: 'out', ip_proto: 'icmp', src_ip: '10.0.0.1', dst_ip: '1.2.3.4', src_port: null, dst_port: '' },
    { direction: 'out', ip_proto: 'icmp', src_ip: '10.0.0.1', src_port: null, dst_ip: '1.2.3.4', dst_port: null },
  ],
  [
    { direction: 'in', ip_proto: 'tcp', src_ip: '2001:DB8:0:0:0:0:0:1', src_port: '1', dst_ip: '2001:db8::0:9', dst_port: '65535' },
    { direction: 'in', ip_proto: 'tcp', src_ip: '2001:db8::1', src_port: 1, dst_ip: '2001:db8::9', dst_port: 65535 },
  ],
  [
    { direction: 'in', ip_proto: 'udp', src_ip: '::ffff:1.2.3.4', dst_ip: ' 10.0.0.1 ', dst_port: 53 },
    { direction: 'in', ip_proto: 'udp', src_ip: '1.2.3.4', src_port: null, dst_ip: '10.0.0.1', dst_port: 53 },
  ],
];

const base = { direction: 'in', ip_proto: 'tcp', src_ip: '1.2.3.4', src_port: 40000, dst_ip: '10.0.0.1', dst_port: 22 };
const PACKETS_BAD: [unknown, string | null][] = [
  [null, null],
  ['in tcp', null],
  [[base], null],
  [{ ...base, direction: undefined }, 'direction'],
  [{ ...base, direction: 'both' }, 'direction'],
  [{ ...base, ip_proto: undefined }, 'ip_proto'],
  [{ ...base, ip_proto: 'sctp' }, 'ip_proto'],
  [{ ...base, ip_proto: 'TCP' }, 'ip_proto'],
  [{ ...base, src_ip: undefined }, 'src_ip'],
  [{ ...base, src_ip: '1.2.3.256' }, 'src_ip'],
  [{ ...base, src_ip: '1.2.3.0/24' }, 'src_ip'],
  [{ ...base, src_ip: '!1.2.3.4' }, 'src_ip'],
  [{ ...base, src_ip: '23' }, 'src_ip'],
  [{ ...base, src_ip: 16909060 }, 'src_ip'],
  [{ ...base, dst_ip: '' }, 'dst_ip'],
  [{ ...base, dst_ip: 'fe80::1%eth0' }, 'dst_ip'],
  [{ ...base, dst_ip: '2001:db8::1' }, 'dst_ip'],
  [{ ...base, dst_port: undefined }, 'dst_port'],
  [{ ...base, dst_port: 0 }, 'dst_port'],
  [{ ...base, dst_port: 65536 }, 'dst_port'],
  [{ ...base, dst_port: '22:23' }, 'dst_port'],
  [{ ...base, dst_port: 22.5 }, 'dst_port'],
  [{ ...base, src_port: -1 }, 'src_port'],
  [{ ...base, src_port: 'http' }, 'src_port'],
  [{ ...base, ip_proto: 'icmp', src_port: null, dst_port: 22 }, 'dst_port'],
  [{ ...base, ip_proto: 'icmp', dst_port: null }, 'src_port'],
];

// ---------------------------------------------------------------------------------------------------------

const matchCount = Object.values(MATCH_TABLES).reduce((n, t) => n + t.length, 0);
const TOTAL = matchCount + ORDERING.length + LEVELS.length + COMBINED.length + STATES.length + PACKETS_OK.length + PACKETS_BAD.length;

const show = (rule: Partial<FwRule>) => JSON.stringify(Object.fromEntries(Object.entries(rule).filter(([, v]) => v !== null)));

describe('one rule against one packet', () => {
  for (const [name, table] of Object.entries(MATCH_TABLES)) {
    test(`${name} (${table.length} cases)`, () => {
      for (const [fields, packet, match] of table) {
        const got = evaluatePolicy([R(fields)], P(packet));
        assert.deepEqual(got, match ? { verdict: 'drop', rule: 0 } : { verdict: 'accept', rule: null }, `${show(fields)} vs ${packet}`);
        // the same rule accepting gives the same match, with the other verdict
        const accepting = evaluatePolicy([R({ ...fields, action: 'accept' }), R()], P(packet));
        assert.deepEqual(accepting, match ? { verdict: 'accept', rule: 0 } : { verdict: 'drop', rule: 1 }, `accepting ${show(fields)} vs ${packet}`);
      }
    });
  }
});

describe('policies', () => {
  test(`first match wins, later rules are shadowed, no match accepts (${ORDERING.length} cases)`, () => {
    assert.equal(AWESOME.length, 5);
    for (const [rules, packet, verdict, rule] of ORDERING) {
      assert.deepEqual(evaluatePolicy(rules, P(packet)), { verdict, rule }, `${rules.map(show).join(', ')} vs ${packet}`);
    }
  });

  test('a rule is compiled once per object and per text; a changed copy is a different rule', () => {
    const rule = R({ ip_proto: 'tcp', dst_port: '22' });
    const packet = P('in tcp 1.2.3.4:1 > 10.0.0.1:22');
    for (let i = 0; i < 3; i++) assert.deepEqual(evaluatePolicy([rule], packet), { verdict: 'drop', rule: 0 });
    assert.deepEqual(evaluatePolicy([{ ...rule }], packet), { verdict: 'drop', rule: 0 });
    assert.deepEqual(evaluatePolicy([{ ...rule, dst_port: '23' }], packet), { verdict: 'accept', rule: null });
    assert.deepEqual(evaluatePolicy([{ ...rule, action: 'accept' }, R()], packet), { verdict: 'accept', rule: 0 });
    assert.deepEqual(evaluatePolicy([{ ...rule, direction: 'out' }], packet), { verdict: 'accept', rule: null });
  });

  test('a malformed rule handed to the evaluator is a validation error naming it', () => {
    const packet = P('in tcp 1.2.3.4:1 > 10.0.0.1:22');
    assert.equal(failure(() => evaluatePolicy([R({ direction: 'in', ip_proto: 'udp' }), R({ dst_port: '0' })], packet)).point, 'rules.1.dst_port');
    assert.equal(failure(() => evaluatePolicy([R({ src_ip: '300.1.1.1' })], packet)).point, 'rules.0.src_ip');
    assert.equal(failure(() => evaluatePolicy([R({ action: 'reject' as any })], packet)).point, 'rules.0.action');
    assert.equal(failure(() => evaluatePolicy([R({ src_ip: '1.2.3.4', dst_ip: '::1' })], packet)).point, 'rules.0.dst_ip');
  });

  test('an ICMP packet has no ports even when the caller left some on it', () => {
    const ping = { ...P('out icmp 10.0.0.1 > 1.2.3.4'), src_port: 22, dst_port: 22 };
    assert.deepEqual(evaluatePolicy([R({ dst_port: '22' }), R({ src_port: '!80' })], ping), { verdict: 'accept', rule: null });
    assert.deepEqual(evaluateLevel('trial', ping), { verdict: 'accept', reason: null, rate_limit: null });
    assert.deepEqual(evaluateLevel('guest', ping), { verdict: 'accept', reason: null, rate_limit: null });
  });

  test('a packet the evaluator cannot read is a validation error naming the field', () => {
    assert.equal(failure(() => evaluatePolicy([], { ...P('in tcp 1.2.3.4:1 > 10.0.0.1:22'), src_ip: 'nope' })).point, 'src_ip');
    assert.equal(failure(() => evaluate([], 'regular', { ...P('in tcp 1.2.3.4:1 > 10.0.0.1:22'), dst_ip: '::1' })).point, 'dst_ip');
    assert.equal(failure(() => evaluateLevel('platinum' as RestrictionLevel, P('out tcp 10.0.0.1:1 > 1.2.3.4:22'))).point, 'level');
  });
});

describe('restriction levels', () => {
  test(`each level, outbound only (${LEVELS.length} cases)`, () => {
    for (const [level, packet, verdict, reason, rate_limit] of LEVELS) {
      assert.deepEqual(evaluateLevel(level, P(packet)), { verdict, reason, rate_limit }, `${level}: ${packet}`);
    }
  });

  test('each level includes the one below it', () => {
    const ladder: RestrictionLevel[] = ['regular', 'trial', 'guest'];
    const packets = LEVELS.map(([, p]) => P(p));
    for (let i = 1; i < ladder.length; i++) {
      for (const packet of packets) {
        const below = evaluateLevel(ladder[i - 1], packet);
        if (below.verdict === 'drop') assert.equal(evaluateLevel(ladder[i], packet).verdict, 'drop', `${ladder[i]} ${JSON.stringify(packet)}`);
      }
    }
    for (const packet of packets) {
      if (evaluateLevel('regular', packet).verdict === 'drop') assert.equal(evaluateLevel('no_outgoing_email', packet).verdict, 'drop');
    }
  });

  test(`the account state picks the level (${STATES.length} cases)`, () => {
    for (const [state, level] of STATES) assert.equal(restrictionLevelOf(state), level, state);
  });
});

describe('policy and level together', () => {
  test(`the policy first, then the level on what it accepted (${COMBINED.length} cases)`, () => {
    for (const [rules, level, packet, expected] of COMBINED) {
      const got = evaluate(rules, level, P(packet));
      assert.equal(got.level, level);
      assert.deepEqual(Object.keys(got).sort(), ['decided_by', 'level', 'rate_limit', 'reason', 'rule', 'verdict']);
      for (const [key, value] of Object.entries(expected))
        assert.deepEqual((got as any)[key], value, `${key}: ${rules.map(show).join(', ')} / ${level} / ${packet}`);
    }
  });

  test('evaluate agrees with evaluatePolicy and evaluateLevel on every level case', () => {
    for (const [level, text] of LEVELS) {
      const packet = P(text);
      const alone = evaluateLevel(level, packet);
      const both = evaluate([], level, packet);
      assert.deepEqual([both.verdict, both.reason, both.rate_limit], [alone.verdict, alone.reason, alone.rate_limit]);
      assert.equal(both.decided_by, alone.verdict === 'drop' ? 'restriction' : 'default');
    }
  });
});

describe('packets from the API', () => {
  test(`valid bodies (${PACKETS_OK.length} cases)`, () => {
    for (const [body, packet] of PACKETS_OK) assert.deepEqual(parsePacket(body), packet, JSON.stringify(body));
  });

  test(`invalid bodies name the field (${PACKETS_BAD.length} cases)`, () => {
    for (const [body, point] of PACKETS_BAD) {
      const error = failure(() => parsePacket(body));
      assert.equal(error.point, point, `${JSON.stringify(body)} -> ${error.point} (${error.message})`);
    }
  });

  test('a parsed packet evaluates like the notation', () => {
    const packet = parsePacket({ direction: 'in', ip_proto: 'udp', src_ip: '::ffff:172.66.32.55', dst_ip: '10.0.0.1', src_port: '5000', dst_port: '53' });
    assert.deepEqual(evaluatePolicy(AWESOME, packet), { verdict: 'accept', rule: null });
    assert.deepEqual(evaluatePolicy(AWESOME, { ...packet, src_ip: '172.66.32.54' }), { verdict: 'drop', rule: 3 });
  });
});

test('the tables hold at least 200 cases', (t) => {
  t.diagnostic(
    `${TOTAL} table cases: ${matchCount} rule matches, ${ORDERING.length} policies, ${LEVELS.length} level, ${COMBINED.length} combined, ` +
      `${STATES.length} states, ${PACKETS_OK.length + PACKETS_BAD.length} packet bodies`,
  );
  assert.ok(TOTAL >= 200, `${TOTAL} cases`);
});
