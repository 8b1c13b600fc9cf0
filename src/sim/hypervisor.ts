import type { Services } from '../core/context.js';
import type { DriveDisk, GuestHardware, GuestState, RandomSource, Tunnel } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import { leaseAddress, releaseLeases } from './network.js';
import { dropState, readAllStates, readState, readStates, updateState } from '../store/sim.js';
import { applyOnBoot } from './firewall-apply.js';
import { dhcpGetsThrough } from './dhcp.js';
import { defaultRandom } from './random.js';
import { startWriting, stopWriting } from './storage.js';
import { place, placementsOf, unplace } from './placement.js';
import { forgetTraffic, startSending, stopSending } from './traffic.js';

/**
 * The simulated hypervisor: what the host and the guest do. The API side (resources/servers) validates,
 * records state changes and their events, and asks the hypervisor; the hypervisor keeps its own state
 * (power-on time, DHCP leases, console tunnels, how the guest behaves) in the simulator's table, decides
 * outcomes (a boot that fails by plan or by chance) and says how long things take.
 */
export type { GuestHardware, GuestState, Tunnel };

const KIND = 'servers';
type Sim = Pick<Services, 'clock' | 'config' | 'store'>;

export const bootMs = (s: Pick<Services, 'config'>) => s.config.delays['server.boot'];
export const stopMs = (s: Pick<Services, 'config'>) => s.config.delays['server.stop'];
export const hostRecoveryMs = (s: Pick<Services, 'config'>) => s.config.delays['server.host_recovery'];

export const guestState = (db: Db | Tx, server: string) => readState<GuestState>(db, KIND, server);
export const guestStates = (db: Db | Tx, servers: readonly string[]) => readStates<GuestState>(db, KIND, servers);
/** Every guest's state (a billing poll over all running servers). */
export const allGuestStates = (db: Db | Tx) => readAllStates<GuestState>(db, KIND);

/**
 * A boot begins: the guest gets a host (not one that runs a server of `avoid`, when another is free), and
 * whether it will fail (planned by the operator, or chaos at the configured rate).
 */
export async function beginBoot(
  tx: Tx,
  s: Sim,
  server: string,
  avoid: readonly string[] = [],
  random: RandomSource = defaultRandom,
): Promise<{ fail: boolean; inMs: number }> {
  await place(tx, s, server, avoid);
  const state = await guestState(tx, server);
  const fail = state.fail_next_boot === true || random.chance(s.config.simFailureRate);
  if (state.fail_next_boot) await updateState(tx, KIND, server, { fail_next_boot: undefined });
  return { fail, inMs: bootMs(s) };
}

/**
 * The guest is up: public DHCP NICs whose request gets through their firewall (dhcp.ts) get their leases,
 * the power-on clock starts, it writes to its disks, its public NICs apply the current rules of their
 * firewall policies.
 */
export async function powerOn(tx: Tx, s: Sim, server: string, { owner, dhcpNics, disks, firewallPolicies, publicNics = 0 }: GuestHardware): Promise<void> {
  const asking = await dhcpGetsThrough(tx, s, owner, dhcpNics);
  const leases: Record<string, string> = {};
  for (const mac of asking) {
    const ip = await leaseAddress(tx, s, server);
    if (ip) leases[mac] = ip;
  }
  await updateState(tx, KIND, server, { active_since: s.clock.now().getTime(), leases });
  // A guest the host restarted on its own (a crash) lands on its home host again.
  if (!(await placementsOf(tx, s, [server], { storedOnly: true })).size) await place(tx, s, server);
  await startWriting(tx, s, server, disks);
  if (publicNics) await startSending(tx, s, server, publicNics);
  await applyOnBoot(tx, server, firewallPolicies);
}

/**
 * The guest is off: while it ran it wrote to its disks; leases go back to the pool; tunnels close. How
 * the guest behaves (ACPI, a planned failure) stays with it.
 */
export async function powerOff(tx: Tx, s: Sim, server: string, disks: readonly DriveDisk[]): Promise<void> {
  const state = await guestState(tx, server);
  await stopWriting(tx, s, server, disks, state.active_since);
  await stopSending(tx, s, server);
  await releaseLeases(tx, s, server);
  await unplace(tx, server);
  await updateState(tx, KIND, server, { active_since: undefined, leases: undefined, vnc_port: undefined, console_port: undefined, fw_applied: undefined });
}

/** An ACPI shutdown request: whether the guest will obey, and when the outcome is known. */
export async function acpiShutdown(db: Db | Tx, s: Pick<Services, 'config'>, server: string): Promise<{ obeys: boolean; inMs: number }> {
  const obeys = (await guestState(db, server)).acpi_ignore !== true;
  return { obeys, inMs: obeys ? s.config.delays['server.shutdown'] : s.config.delays['server.acpi_timeout'] };
}

const SCHEME: Record<Tunnel, string> = { vnc: 'vnc', console: 'csconsole' };

/** Open a console tunnel: a new port on every open, as the real service does. */
export async function openTunnel(tx: Tx, s: Pick<Services, 'config'>, server: string, which: Tunnel, random: RandomSource = defaultRandom): Promise<string> {
  const port = random.int(40_000, 50_000);
  await updateState(tx, KIND, server, { [`${which}_port`]: port });
  return `${SCHEME[which]}://${s.config.vncHost}:${port}`;
}

export async function closeTunnel(tx: Tx, server: string, which: Tunnel): Promise<void> {
  await updateState(tx, KIND, server, { [`${which}_port`]: undefined });
}

/** How the guest will behave (the operator's `stratus sim server UUID acpi_ignore|fail_next_boot`). */
export async function setGuestBehaviour(tx: Tx, server: string, change: Pick<GuestState, 'acpi_ignore' | 'fail_next_boot'>): Promise<void> {
  // Only the keys given change; `false` is stored as absent.
  await updateState(tx, KIND, server, Object.fromEntries(Object.entries(change).map(([k, v]) => [k, v || undefined])));
}

/** A deleted server leaves nothing on the host. */
export async function forgetServer(tx: Tx, s: Pick<Services, 'store'>, server: string): Promise<void> {
  await releaseLeases(tx, s, server);
  await unplace(tx, server);
  await dropState(tx, KIND, server);
  await forgetTraffic(tx, server);
}
