import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Client } from './client.js';
import type { TestServer } from './server.js';

/**
 * Common set-up for tests. Objects that the API can make are made through it (as a client would); only a
 * kind nothing creates (a synthetic kind that tag membership or an ACL needs) is written as a bare row, in
 * `bareResource`, the one place tests write `resources` rows themselves.
 */

/** A valid minimal server definition for POST /servers/. */
export const SERVER_DEF = { cpu: 1000, mem: 536_870_912, vnc_password: 'seed-vnc' };
export const GiB = 1024 ** 3;

/** A new (stopped) server of the client's user, through POST /servers/: no drives, no NICs. */
export async function newServer(c: Client, fields: Record<string, unknown> = {}): Promise<string> {
  const res = await c.post('servers/', { name: 'srv', ...SERVER_DEF, ...fields });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0].uuid;
}

/** A new drive of the client's user, through POST /drives/ (a 1 GiB disk unless `fields` say otherwise). */
export async function newDrive(c: Client, fields: Record<string, unknown> = {}): Promise<string> {
  const res = await c.post('drives/', { media: 'disk', name: 'drive', size: GiB, ...fields });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0].uuid;
}

/**
 * A bare `resources` row (body `{}`) of a kind that no API creates, owned by `owner`; returns its uuid.
 * Tag membership and ACL evaluation need nothing more.
 */
export async function bareResource(srv: TestServer, kind: string, owner: string, uuid: string = randomUUID()): Promise<string> {
  const store = srv.services.store;
  await store.transaction((tx) => store.resources.insert(tx, new Date(), { kind, uuid, owner, body: {} }));
  return uuid;
}
