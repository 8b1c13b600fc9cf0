/**
 * `npx tsx bench/micro-list.ts <db>`: CPU time of one list page made by the service (no HTTP), per account
 * of a kept bench database (bench/profile.ts with PROFILE_KEEP=1), and of its statements alone. KIND=tags: another
 * kind; WHO=solo: one account; MICRO_JSON=0: objects as data (as the XML routes ask).
 */
import { Store } from '../src/store/db.js';
import { registry } from '../src/registry.js';
import { servicesOf } from './seed.js';
import { sortedJson } from '../src/core/json.js';
import type { CollectionDecl } from '../src/core/resource.js';

const db = process.argv[2];
const store = await Store.open(db, { poolSize: 1 });
const s = servicesOf(store, db);
const users = await store.db.selectFrom('users').select(['uuid', 'email']).execute();
const kind = (process.env.KIND ?? 'servers') as string;
const decl = registry.find((d) => d.kind === kind) as CollectionDecl;
const N = Number(process.env.N ?? 2000);
for (const u of users.filter((x) => !process.env.WHO || x.email.startsWith(process.env.WHO))) {
  const ctx = { ...s, caller: { uuid: u.uuid, email: u.email, state: 'REGULAR' } };
  // MICRO_JSON=0: the objects as data (the XML path); else as the JSON routes ask (kept texts where they can).
  const q = { limit: 20, offset: 0, filters: new Map(), order: undefined, json: process.env.MICRO_JSON !== '0' } as never;
  for (let i = 0; i < 200; i++) await decl.service.list(ctx, q);
  const n0 = store.statements;
  const t = process.cpuUsage();
  let bytes = 0;
  for (let i = 0; i < N; i++) bytes = sortedJson(await decl.service.list(ctx, q)).length;
  const used = process.cpuUsage(t);
  const perList = (used.user + used.system) / N;
  process.stdout.write(
    `${u.email.padEnd(22)} ${perList.toFixed(0)} µs CPU/page (with serialisation), ${bytes} bytes, ${((store.statements - n0) / N).toFixed(1)} stmts\n`,
  );
}
await store.close();
