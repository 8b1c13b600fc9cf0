import type { Clock } from './clock.js';
import type { Db, Tx } from '../store/db.js';
import type { BlockWrite } from '../store/data/index.js';

/**
 * The simulated infrastructure as the services see it: the one way resource code reaches "hardware"
 * (`services.sim`). The simulator (src/sim/, `createSimulator`) keeps its own state, decides outcomes
 * (a boot that fails, whether a guest's DHCP request gets through its firewall) and says how long things
 * take; the API side validates, records state changes, events and timers, and asks. A real driver could
 * implement this interface, and a scripted one stands in for it in tests (test/helpers/scripted-sim.ts).
 *
 * Every call that changes simulated state takes the API change's transaction, so the change and what the
 * hardware did commit together; reads take a transaction or the database.
 */
export interface Simulator {
  readonly hypervisor: SimHypervisor;
  readonly storage: SimStorage;
  readonly network: SimNetwork;
  readonly firewall: SimFirewall;
  readonly vrouter: SimVirtualRouter;
  readonly placement: SimPlacement;
  readonly traffic: SimTraffic;
  readonly jobs: SimJobs;
  /** Every chance the simulator takes (chaos failures, MACs, console ports) comes from here. */
  readonly random: RandomSource;
}

export interface RandomSource {
  /** True with probability `rate` (never when `rate` is 0). */
  chance(rate: number): boolean;
  /** `n` random bytes. */
  bytes(n: number): Uint8Array;
  /** An integer in [min, max). */
  int(min: number, max: number): number;
}

/** What the hypervisor keeps about a guest (its power-on time, leases, tunnels, how it behaves). */
export interface GuestState {
  /** Power-on time (ms since the epoch) of a running guest. */
  active_since?: number;
  /** DHCP leases of its public NICs: MAC -> address. */
  leases?: Record<string, string>;
  vnc_port?: number;
  console_port?: number;
  /** Firewall policy -> the rules version its NICs have applied. */
  fw_applied?: Record<string, number>;
  /** The operator planned the next boot to fail. */
  fail_next_boot?: boolean;
  /** The guest ignores ACPI shutdown requests. */
  acpi_ignore?: boolean;
}

/** What a running guest has applied: policy -> version. */
export const appliedOf = (guest: { fw_applied?: unknown }): Record<string, number> => (guest.fw_applied ?? {}) as Record<string, number>;

export interface DriveDisk {
  uuid: string;
  size: number;
}

/** Bytes to write at an offset of a drive, cut into blocks and hashed (`prepareWrite`), ready for a transaction. */
export interface DataWrite {
  offset: number;
  length: number;
  /** Blocks the write covers whole. */
  whole: readonly BlockWrite[];
  /** Parts of blocks at either edge: merged with what the block holds. */
  partial: readonly { idx: number; at: number; bytes: Buffer }[];
}

/** A public NIC that asks DHCP for its address at boot. */
export interface DhcpNic {
  mac: string;
  firewall_policy: string | null;
}

/** What a guest powers on with. */
export interface GuestHardware {
  /** The server's owner: their account's restriction level applies to what its NICs send. */
  owner: string | null;
  /** Its public DHCP NICs: those whose request gets through their firewall get a lease. */
  dhcpNics: readonly DhcpNic[];
  disks: readonly DriveDisk[];
  /** The firewall policies of its public NICs (they apply the current rules at power-on). */
  firewallPolicies: readonly string[];
  /** Public NICs (not on a VLAN, with an IPv4 configuration): each sends traffic while the guest runs. */
  publicNics?: number;
}

export type Tunnel = 'vnc' | 'console';
export type GuestBehaviour = Pick<GuestState, 'acpi_ignore' | 'fail_next_boot'>;

export interface NicCounters {
  bytes_recv: number;
  bytes_sent: number;
  packets_recv: number;
  packets_sent: number;
}

export type DriveCounters = Record<
  'bytes_read' | 'bytes_written' | 'count_flush' | 'count_read' | 'count_written' | 'total_time_ns_flush' | 'total_time_ns_read' | 'total_time_ns_write',
  number
>;

export interface SimHypervisor {
  bootMs(): number;
  /** A hard stop (power cord). */
  stopMs(): number;
  hostRecoveryMs(): number;
  /** A boot begins: the guest gets a host (away from `avoid`'s hosts when one is free) and its outcome. */
  beginBoot(tx: Tx, server: string, avoid?: readonly string[]): Promise<{ fail: boolean; inMs: number }>;
  /** The guest is up: DHCP leases, the power-on clock, disk writes, traffic, firewall rules. */
  powerOn(tx: Tx, server: string, hardware: GuestHardware): Promise<void>;
  /** The guest is off: its writes land, leases go back, tunnels close. */
  powerOff(tx: Tx, server: string, disks: readonly DriveDisk[]): Promise<void>;
  /** An ACPI shutdown request: whether the guest will obey, and when the outcome is known. */
  acpiShutdown(db: Db | Tx, server: string): Promise<{ obeys: boolean; inMs: number }>;
  /** How the guest will behave (only the keys given change). */
  setGuestBehaviour(tx: Tx, server: string, change: GuestBehaviour): Promise<void>;
  /** Open a console tunnel: its address (a new port on every open). */
  openTunnel(tx: Tx, server: string, which: Tunnel): Promise<string>;
  closeTunnel(tx: Tx, server: string, which: Tunnel): Promise<void>;
  /** Guests' states: of `servers`, or of every guest when absent (a billing poll). */
  guestStates(db: Db | Tx, servers?: readonly string[]): Promise<Map<string, Partial<GuestState>>>;
  /** A deleted server leaves nothing on the host. */
  forgetServer(tx: Tx, server: string): Promise<void>;
  /** I/O counters of a guest running since `since` (ms), at `now`. */
  nicCounters(since: number, now: Date): NicCounters;
  driveCounters(since: number, now: Date): DriveCounters;
}

export interface SimStorage {
  createMs(): number;
  resizeMs(): number;
  snapshotMs(): number;
  /** A clone of `size` bytes. */
  cloneMs(size: number): number;
  /** A new drive gets a storage node, away from `avoid`'s nodes when one is free. */
  allocateDrive(tx: Tx, drive: string, avoid?: readonly string[]): Promise<number>;
  forgetDrive(tx: Tx, drive: string): Promise<void>;
  /** A new clone holds the source's data now. */
  copyData(tx: Tx, from: DriveDisk, to: string, size: number): Promise<void>;
  /** A clone of a snapshot holds the drive's data as it was then. */
  copySnapshotData(tx: Tx, snapshot: string, to: string, size: number): Promise<void>;
  takeSnapshot(tx: Tx, drive: DriveDisk, snapshot: string): Promise<void>;
  /**
   * Each snapshot's allocated size (unknown: 0) at the time of `clock`: the request's (an answer that
   * read it is never reused), a billing poll's moment; the simulator's own when absent.
   */
  snapshotSizes(db: Db | Tx, snapshots: readonly string[], clock?: Pick<Clock, 'now'>): Promise<Map<string, number>>;
  forgetSnapshots(tx: Tx, snapshots: readonly string[]): Promise<void>;
  /** The next clone of `source` (null: of any drive) fails. */
  failNextClone(tx: Tx, source: string | null): Promise<void>;
  /** Whether the clone of `source` finishing now fails (spending the fault that says so). */
  takeCloneFailure(tx: Tx, source: string): Promise<boolean>;
  /** Bytes of data on a drive now. */
  writtenBytes(db: Db | Tx, drive: DriveDisk): Promise<number>;
  /** The operator sets a drive's data; returns what it holds. */
  setWritten(tx: Tx, drive: DriveDisk, bytes: number): Promise<number>;
  /** The storage's block size: what its sizes and differences are counted in. */
  blockSize(): number;
  /** Cut bytes to be written at `offset` into blocks (pure: no transaction needs to be open). */
  prepareWrite(offset: number, data: Buffer): DataWrite;
  /** Write prepared bytes to a drive (its row locked by the caller; within its size). */
  writeData(tx: Tx, drive: DriveDisk, write: DataWrite): Promise<void>;
  /** A drive's bytes from `start` to `end` (exclusive), streamed; unwritten bytes read as zeroes. */
  readData(db: Db | Tx, drive: DriveDisk, start: number, end: number): AsyncIterable<Buffer>;
  /** What the storage really holds: distinct blocks and their bytes, over every drive and snapshot. */
  storedData(db: Db | Tx): Promise<{ blocks: number; bytes: number }>;
}

export interface SimNetwork {
  /** A new MAC address. */
  newMac(): string;
  /** Claim up to `count` free pool addresses for `owner` (null: a lease), with `extra` API body keys. */
  claimAddresses(tx: Tx, count: number, owner: string | null, extra?: Record<string, unknown>): Promise<string[]>;
}

export interface SimFirewall {
  /** How often the network applies changed policies. */
  propagationMs(): number;
  /** The current rules version of each policy. */
  policyVersions(db: Db | Tx, policies: readonly string[]): Promise<Map<string, number>>;
  /** A policy's rules changed: a new version, applied at the next tick. */
  rulesChanged(tx: Tx, policy: string): Promise<number>;
  /** The propagation tick: changed policies reach the running servers using them (locked first). */
  propagate(tx: Tx, lockServers: (uuids: string[]) => Promise<unknown>): Promise<number>;
  forgetPolicy(tx: Tx, policy: string): Promise<void>;
}

/** What the router enforces for one policy. */
export interface Enforced<R = Record<string, unknown>> {
  order: number;
  lan_interface: string | null;
  upstream_interface: string | null;
  /** In the order the router tries them. */
  filters: R[];
}

export interface SimVirtualRouter {
  /** How long the router takes to apply or remove a policy's filters. */
  firewallMs(): number;
  enforcedFor<R>(db: Db | Tx, policy: string): Promise<Enforced<R> | null>;
  enforcedForMany<R>(db: Db | Tx, policies: readonly string[]): Promise<Map<string, Enforced<R>>>;
  /** The router takes a policy's configuration (null: removes its filters). */
  enforce<R>(tx: Tx, policy: string, config: Enforced<R> | null): Promise<void>;
}

export interface SimPlacement {
  /** Groups of the given objects that share a host, largest first. */
  groupsOf(db: Db | Tx, uuids: readonly string[]): Promise<string[][]>;
  /** The given objects that share `uuid`'s host. */
  groupOf(db: Db | Tx, uuid: string, uuids: readonly string[]): Promise<string[]>;
}

export interface SimTraffic {
  /** What servers sent in `from`..`to` (ms): of `servers`, or of every server when absent. */
  sentBetween(db: Db | Tx, from: number, to: number, servers?: readonly string[]): Promise<Map<string, number>>;
  sentBytes(db: Db | Tx, server: string): Promise<number>;
  /** The server sends `bytes` now; returns its counter after. */
  sendBurst(tx: Tx, server: string, bytes: number): Promise<number>;
}

/** When a long operation planned as a job started and will end (ms). */
export interface JobTiming {
  started_at: number;
  ends_at: number;
}

export interface SimJobs {
  /** A job starting at `at` that its operation's `durationMs` will end. */
  begin(tx: Tx, job: string, at: Date, durationMs: number): Promise<void>;
  timings(db: Db | Tx, jobs: readonly string[]): Promise<Map<string, Partial<JobTiming>>>;
  forget(tx: Tx, job: string): Promise<void>;
}
