import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { assignIps, listIpRows, releaseIp } from '../resources/ips/ips.js';
import { blockOf, poolSize } from '../core/ip-pool.js';
import { findUserByEmail } from '../resources/users/users.js';
import { assignVlans, listVlanRows, releaseVlan } from '../resources/vlans/vlans.js';

/**
 * The operator's side of networking, until subscriptions hand out IPs and VLANs:
 *   stratus ips assign EMAIL [--count N]     free pool addresses to an account
 *   stratus ips release ADDRESS              an address back to the pool (refused while a server uses it)
 *   stratus ips list [EMAIL]                 addresses in use, and the pool's size
 *   stratus vlans assign EMAIL [--count N]   new private VLANs for an account
 *   stratus vlans release UUID               remove a VLAN (refused while servers are in it)
 *   stratus vlans list [EMAIL]
 * The pool is this command's own `--ip-pool` setting: give it the same value (or STRATUS_IP_POOL) as the server.
 */
function parseCount(raw: string | undefined): number {
  if (raw === undefined) return 1;
  if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1) throw new ConfigError(`--count must be a whole number from 1 to 9999, got "${raw}"`);
  return Number(raw);
}

async function userUuid(s: Services, email: string): Promise<string> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  return user.uuid;
}

export async function ipsCommand(s: Services, args: string[], opts: { count?: string }, usage: string): Promise<string> {
  const [sub, arg] = args;
  if (sub === 'assign' && arg) {
    const count = parseCount(opts.count);
    const owner = await userUuid(s, arg);
    const got = await s.store.transaction((tx) => assignIps(tx, s, owner, count));
    return got.map((a) => `assigned ${a} to ${arg}\n`).join('');
  }
  if (sub === 'release' && arg) {
    await s.store.transaction((tx) => releaseIp(tx, s, arg));
    return `released ${arg}\n`;
  }
  if (sub === 'list') {
    const rows = await listIpRows(s, arg ? await userUuid(s, arg) : undefined);
    const lines = rows.map((r) => {
      const who = r.owner_uuid ? (r.email ?? r.owner_uuid) : '(dhcp lease)';
      const use = r.server_uuid ? `server ${r.server_uuid}${r.dynamic === 1 ? ' (dhcp)' : ' (static)'}` : '-';
      return `${r.address.padEnd(16)} ${who.padEnd(32)} ${use}\n`;
    });
    const used = rows.filter((r) => blockOf(s.config.ipPool, r.address)).length;
    const pool = s.config.ipPool.map((b) => b.cidr).join(', ');
    return lines.join('') + (arg ? '' : `pool ${pool}: ${used} of ${poolSize(s.config.ipPool)} addresses in use\n`);
  }
  throw new ConfigError(usage);
}

export async function vlansCommand(s: Services, args: string[], opts: { count?: string }, usage: string): Promise<string> {
  const [sub, arg] = args;
  if (sub === 'assign' && arg) {
    const count = parseCount(opts.count);
    const owner = await userUuid(s, arg);
    const got = await s.store.transaction((tx) => assignVlans(tx, s, owner, count));
    return got.map((u) => `assigned vlan ${u} to ${arg}\n`).join('');
  }
  if (sub === 'release' && arg) {
    await s.store.transaction((tx) => releaseVlan(tx, s, arg));
    return `released vlan ${arg}\n`;
  }
  if (sub === 'list') {
    const rows = await listVlanRows(s, arg ? await userUuid(s, arg) : undefined);
    return rows.map((r) => `${r.uuid}  ${(r.email ?? '-').padEnd(32)} ${Number(r.servers)} server(s)\n`).join('');
  }
  throw new ConfigError(usage);
}
