import type { Services } from '../core/context.js';
import type { RandomSource, Simulator } from '../core/sim.js';
import * as firewall from './firewall-apply.js';
import * as hypervisor from './hypervisor.js';
import { beginJob, forgetJob, jobTimings } from './jobs.js';
import * as network from './network.js';
import * as placement from './placement.js';
import { defaultRandom } from './random.js';
import { driveCounters, nicCounters } from './runtime.js';
import * as storage from './storage.js';
import * as data from './data.js';
import * as traffic from './traffic.js';
import * as vrouter from './vrouter.js';

/** What the simulator runs on: the store (its own table), the injected clock, the configuration (delays, pool, hosts). */
export type SimDeps = Pick<Services, 'clock' | 'config' | 'store'>;

/**
 * The simulated infrastructure behind the `Simulator` interface (core/sim.ts). `deps` is read at every
 * call (a test that moves the clock moves the simulator's); `random` is every chance it takes.
 */
export function createSimulator(deps: SimDeps, random: RandomSource = defaultRandom): Simulator {
  const s = deps;
  return {
    random,
    hypervisor: {
      bootMs: () => hypervisor.bootMs(s),
      stopMs: () => hypervisor.stopMs(s),
      hostRecoveryMs: () => hypervisor.hostRecoveryMs(s),
      beginBoot: (tx, server, avoid) => hypervisor.beginBoot(tx, s, server, avoid, random),
      powerOn: (tx, server, hardware) => hypervisor.powerOn(tx, s, server, hardware),
      powerOff: (tx, server, disks) => hypervisor.powerOff(tx, s, server, disks),
      acpiShutdown: (db, server) => hypervisor.acpiShutdown(db, s, server),
      setGuestBehaviour: (tx, server, change) => hypervisor.setGuestBehaviour(tx, server, change),
      openTunnel: (tx, server, which) => hypervisor.openTunnel(tx, s, server, which, random),
      closeTunnel: (tx, server, which) => hypervisor.closeTunnel(tx, server, which),
      guestStates: (db, servers) => (servers ? hypervisor.guestStates(db, servers) : hypervisor.allGuestStates(db)),
      forgetServer: (tx, server) => hypervisor.forgetServer(tx, s, server),
      nicCounters,
      driveCounters,
    },
    storage: {
      createMs: () => storage.createMs(s),
      resizeMs: () => storage.resizeMs(s),
      snapshotMs: () => storage.snapshotMs(s),
      cloneMs: (size) => storage.cloneMs(s, size),
      allocateDrive: (tx, drive, avoid) => storage.allocateDrive(tx, s, drive, avoid),
      forgetDrive: (tx, drive) => storage.forgetDrive(tx, s, drive),
      copyData: (tx, from, to, size) => storage.copyData(tx, s, from, to, size),
      copySnapshotData: (tx, snapshot, to, size) => storage.copySnapshotData(tx, s, snapshot, to, size),
      takeSnapshot: (tx, drive, snapshot) => storage.takeSnapshot(tx, s, drive, snapshot),
      snapshotSizes: (db, snapshots, clock) => storage.snapshotSizes(db, clock ? { config: s.config, clock, store: s.store } : s, snapshots),
      forgetSnapshots: (tx, snapshots) => storage.forgetSnapshots(tx, s, snapshots),
      failNextClone: (tx, source) => storage.failNextClone(tx, source),
      takeCloneFailure: (tx, source) => storage.takeCloneFailure(tx, source),
      writtenBytes: (db, drive) => storage.writtenBytes(db, s, drive),
      setWritten: (tx, drive, bytes) => storage.setWritten(tx, s, drive, bytes),
      blockSize: () => data.BLOCK,
      prepareWrite: (offset, bytes) => data.prepareWrite(offset, bytes),
      writeData: (tx, drive, write) => data.writeData(tx, s, drive, write),
      readData: (db, drive, start, end) => data.readData(db, s, drive, start, end),
      storedData: (db) => s.store.data.stored(db),
    },
    network: {
      newMac: () => network.newMac(random),
      claimAddresses: (tx, count, owner, extra) => network.claimAddresses(tx, s, count, owner, extra),
    },
    firewall: {
      propagationMs: () => firewall.PROPAGATION_MS,
      policyVersions: (db, policies) => firewall.policyVersions(db, policies),
      rulesChanged: (tx, policy) => firewall.rulesChanged(tx, policy),
      propagate: (tx, lockServers) => firewall.propagate(tx, lockServers),
      forgetPolicy: (tx, policy) => firewall.forgetPolicy(tx, policy),
    },
    vrouter: {
      firewallMs: () => vrouter.routerMs(s),
      enforcedFor: (db, policy) => vrouter.enforcedFor(db, policy),
      enforcedForMany: (db, policies) => vrouter.enforcedForMany(db, policies),
      enforce: (tx, policy, config) => vrouter.enforce(tx, policy, config),
    },
    placement: {
      groupsOf: (db, uuids) => placement.groupsOf(db, s, uuids),
      groupOf: (db, uuid, uuids) => placement.groupOf(db, s, uuid, uuids),
    },
    traffic: {
      sentBetween: (db, from, to, servers) => traffic.sentBetween(db, s, from, to, servers),
      sentBytes: (db, server) => traffic.sentBytes(db, s, server),
      sendBurst: (tx, server, bytes) => traffic.sendBurst(tx, s, server, bytes),
    },
    jobs: {
      begin: (tx, job, at, durationMs) => beginJob(tx, job, at, durationMs),
      timings: (db, jobs) => jobTimings(db, jobs),
      forget: (tx, job) => forgetJob(tx, job),
    },
  };
}

/**
 * `base` with its simulator, which reads `base`'s clock, config and store at every call, so a service
 * that swaps one (serve sets the admin token's config, a test its clock) swaps the simulator's too.
 */
export function withSimulator<T extends SimDeps>(base: T, random?: RandomSource): T & { sim: Simulator } {
  const services = base as T & { sim: Simulator };
  services.sim = createSimulator(services, random);
  return services;
}
