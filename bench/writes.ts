/**
 * "Writes": `POST /servers/` (one server with a DHCP NIC per request) and `PUT /servers/<uuid>/` (a new
 * name and meta, round-robin over the servers the POST run made, so concurrent PUTs rarely wait on one
 * row lock), by an account of their own so the measured account keeps its size. Reported as req/s,
 * statements per request and the ratio to a raw server replaying the same reply bytes; compared with the
 * figures recorded before issue 11's work (bench/baseline.ts), goal 5x.
 */
import { startChild, type Child } from './children.js';
import { request } from './http.js';
import { measure, type Load, type Run, type RunSettings } from './measure.js';
import type { Account } from './seed.js';
import type { Store } from '../src/store/db.js';

export interface WriteRow {
  label: string;
  stratus: Run;
  raw: Run;
  ratio: number;
}

export const newServer = (n: number) => ({
  name: `w-${n}`,
  cpu: 1000,
  mem: 1024 ** 3,
  vnc_password: 'bench-vnc',
  nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
});
export const change = (n: number) => ({ name: `w-renamed-${n}`, meta: { revision: String(n) } });

export async function writeSection(store: Store, stratus: Child, writer: Account, s: RunSettings): Promise<WriteRow[]> {
  let n = 0;
  const post: Load = { path: '/api/2.0/servers/', headers: writer.headers, method: 'POST', body: newServer(0), vary: () => ({ body: newServer(++n) }) };
  const postRun = await measure(stratus, post, s);

  const uuids = (await store.resources.listWithOwnerEmail(store.db, 'servers', writer.uuid)).map((r) => r.uuid);
  if (!uuids.length) throw new Error(`the POST run made no servers: ${JSON.stringify(postRun)}`);
  let k = 0;
  const put: Load = {
    path: `/api/2.0/servers/${uuids[0]}/`,
    headers: writer.headers,
    method: 'PUT',
    body: change(0),
    vary: () => ({ path: `/api/2.0/servers/${uuids[k % uuids.length]}/`, body: change(++k) }),
  };
  const putRun = await measure(stratus, put, s);

  // The raw server answers each method with one recorded reply of that method (it ignores request bodies).
  const json = { ...writer.headers, 'content-type': 'application/json' };
  const posted = await request(`${stratus.base}${post.path}`, json, 'POST', newServer(-1));
  const putted = await request(`${stratus.base}${put.path}`, json, 'PUT', change(-1));
  if (posted.status !== 201 || putted.status !== 200) throw new Error(`recording the write replies: POST ${posted.status}, PUT ${putted.status}`);
  const reply = (path: string, r: typeof posted) => ({
    path,
    status: r.status,
    contentType: String(r.headers['content-type']),
    body: r.body.toString('base64'),
  });
  const raw: Child = await startChild({ mode: 'raw', replies: [reply(post.path, posted), reply(put.path, putted)] });
  try {
    const rawPost = await measure(raw, { ...post, vary: undefined }, s);
    const rawPut = await measure(raw, { ...put, vary: undefined }, s);
    return [
      { label: 'POST /servers/', stratus: postRun, raw: rawPost, ratio: postRun.reqPerSec / rawPost.reqPerSec },
      { label: 'PUT /servers/<uuid>/', stratus: putRun, raw: rawPut, ratio: putRun.reqPerSec / rawPut.reqPerSec },
    ];
  } finally {
    await raw.close();
  }
}
