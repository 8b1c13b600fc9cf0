import Type from 'typebox';
import type { Ctx } from '../../core/context.js';
import { permission } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import type { TimerHandler } from '../../core/timers.js';
import { evaluate, parsePacket, restrictionLevelOf, type FwRule } from '../../core/firewall.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { normaliseRules } from './rules.js';
import { serversOf, setServerPolicies } from './servers.js';

/**
 * Firewall policies (spec "Firewall policy", reference §14.1). A policy's rules are validated and
 * normalised on the way in (rules.ts); its `servers` are the servers whose NICs use it (kept with the
 * NICs, servers.ts). A change of its rules reaches running servers at the next propagation tick
 * (sim/firewall-apply.ts). Shared through ACLs (LIST, EDIT, ATTACH, DELETE) although, as recorded, a
 * policy shows no `grantees` or `permissions`. A policy used by servers can be deleted only while all of
 * them are stopped; their NICs are left without a policy.
 */
const ruleFields = {
  action: f.string({ required: true, choices: ['drop', 'accept'], schemaDefault: null, help: 'Action to be taken' }),
  comment: f.string({ schemaDefault: null, help: 'Optional rule comment' }),
  direction: f.string({ required: true, choices: ['in', 'out', 'both'], schemaDefault: null, help: 'Packet direction' }),
  dst_ip: f.string({ schemaDefault: null, help: 'Destination IP address' }),
  dst_port: f.string({ schemaDefault: null, help: 'Destination port' }),
  ip_proto: f.string({ choices: ['tcp', 'udp'], schemaDefault: null, help: 'IP protocol' }),
  src_ip: f.string({ schemaDefault: null, help: 'Source IP address' }),
  src_port: f.string({ schemaDefault: null, help: 'Source port' }),
};

export const fwpolicyFields = {
  meta: f.dict({ schemaDefault: {}, help: 'User assigned meta information for this policy' }),
  name: f.string({ maxLength: 1024, nullable: true, default: null, schemaDefault: null, help: 'Human readable name of the firewall policy' }),
  owner: f.related({ readonly: true, schemaDefault: null, help: 'Owner of the policy' }),
  resource_uri: f.string({ readonly: true, required: true }),
  // Validated rule by rule in rules.ts (each error names its rule and field).
  rules: f.relatedItems(Type.Unknown(), { nullable: true, schemaDefault: [], help: 'List of rules to be applied for this policy', fields: ruleFields }),
  servers: f.relatedItems(Type.Unknown(), { readonly: true, schemaDefault: [], help: 'Servers which have nics with this policy applied' }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the policy' }),
};

const CATEGORY = 'Firewall policies';

/** `servers` of a page of policies: one read of who uses them. */
async function showServers(ctx: Ctx, policies: Obj[]): Promise<void> {
  const using = await serversOf(
    ctx.store.db,
    policies.map((p) => p.uuid as string),
  );
  for (const p of policies) p.servers = (using.get(p.uuid as string) ?? []).map((s) => ref('servers', s));
}

/**
 * `action/?do=evaluate` (beyond the recorded API): what the simulated network does with a packet on a
 * public NIC using this policy — the policy's current rules, first match wins (no match: accept), then the
 * restrictions of the caller's account level. Answers the verdict, the deciding rule's index (null: the
 * default or a restriction), the rules version it was decided on and the level in force.
 */
async function evaluatePacket(ctx: Ctx, uuid: string, body: Obj): Promise<Obj> {
  const packet = parsePacket(body);
  // The action route has checked LIST; the rules and their version are read together.
  const { rules, version } = await ctx.store.snapshot(async (db) => ({
    rules: ((await ctx.store.resources.get(db, 'fwpolicies', uuid))?.body.rules as FwRule[] | undefined) ?? [],
    version: (await ctx.sim.firewall.policyVersions(db, [uuid])).get(uuid) ?? 1,
  }));
  const result = evaluate(rules, restrictionLevelOf(ctx.caller.state), packet);
  return { ...result, packet, policy: ref('fwpolicies', uuid), version };
}

/** The servers using a policy, locked (servers before the policy, as a server's edit takes them). */
async function lockUsers(tx: Tx, ctx: Ctx, policy: string) {
  return ctx.store.resources.lockMany(tx, 'servers', (await serversOf(tx, [policy])).get(policy) ?? []);
}

export const fwpolicies = storedDecl(
  {
    kind: 'fwpolicies',
    flavour: 'custom',
    fields: fwpolicyFields,
    // The recorded schema lists PUT on the list; the list PUT itself answers 405.
    listMethods: ['get', 'put', 'delete', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    listFields: ['meta', 'name', 'owner', 'resource_uri', 'uuid'],
    permissions: ['LIST', 'EDIT', 'ATTACH', 'DELETE'],
    showsSharing: false,
    taggable: true,
    actions: {
      evaluate: { permission: 'LIST', async: false, run: (ctx, uuid, body) => evaluatePacket(ctx, uuid, body) },
    },
    timers: {
      // Spec "Limits" 2: changes reach running servers every 30 seconds (one tick across all processes).
      'firewall.propagate': {
        everyMs: (s) => s.sim.firewall.propagationMs(),
        async run(s, tx) {
          await s.sim.firewall.propagate(tx, (servers) => s.store.resources.lockMany(tx, 'servers', servers));
        },
      },
    } satisfies Record<string, TimerHandler>,
  },
  {
    prepare(values) {
      if (values.rules !== undefined) values.rules = normaliseRules(values.rules);
      return values;
    },
    async beforeUpdate(tx, ctx, row, values) {
      if (values.rules !== undefined && JSON.stringify(values.rules) !== JSON.stringify(row.body.rules ?? []))
        await ctx.sim.firewall.rulesChanged(tx, row.uuid);
      return values;
    },
    async afterWrite(tx, ctx, uuid, _values, mode, input) {
      const owner = (await ctx.store.resources.get(tx, 'fwpolicies', uuid))?.owner_uuid ?? '';
      await record(tx, ctx, { action: mode, category: CATEGORY, uuid, owner, actor: ctx.caller.uuid, details: mode === 'create' ? JSON.stringify(input) : '' });
    },
    async lockBeforeDelete(tx, ctx, uuid) {
      await lockUsers(tx, ctx, uuid);
    },
    async beforeDelete(tx, ctx, uuid, row) {
      // Servers that began using the policy before it was locked are locked now (they committed first).
      const users = await lockUsers(tx, ctx, uuid);
      const busy = users.filter((s) => s.body.status !== 'stopped');
      if (busy.length)
        throw permission(`Only policies attached to servers in status stopped can be deleted; server ${busy[0].uuid} is ${String(busy[0].body.status)}`);
      const now = ctx.clock.now();
      for (const server of users) {
        const nics = ((server.body.nics as Obj[] | undefined) ?? []).map((n) => (n.firewall_policy === uuid ? { ...n, firewall_policy: null } : n));
        await ctx.store.resources.write(tx, now, server, { ...server.body, nics });
        const still = [...new Set(nics.map((n) => n.firewall_policy).filter((p): p is string => typeof p === 'string'))];
        await setServerPolicies(tx, server.uuid, still);
      }
      await ctx.sim.firewall.forgetPolicy(tx, uuid);
      await record(tx, ctx, { action: 'delete', category: CATEGORY, uuid, owner: row.owner_uuid ?? '', actor: ctx.caller.uuid });
    },
    presentStatic: (p) => ({ ...p, rules: p.rules ?? [], servers: [] }),
    decorate: showServers,
  },
);
