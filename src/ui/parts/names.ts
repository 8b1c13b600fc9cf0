import { useEffect, useState } from 'preact/hooks';
import { get, query, type ListAnswer } from '../api.js';
import { kindOf } from '../kinds.js';
import { onLiveState, subscribe } from '../live.js';

/**
 * The names of the objects a page refers to by uuid only (a server's drives and tags, a drive's
 * `mounted_on`): the API embeds `{resource_uri, uuid}`, and a person reads names. The references a page
 * renders in one pass are asked for together, one `GET <kind>/?uuid=a,b,…&fields=uuid,name` per kind (the
 * list's `uuid` filter takes a comma list), and kept while the live stream runs: its event about an object
 * drops the object's name (a rename), and a stream that (re)connects, or another sign-in, drops them all
 * (events may have been missed; another account sees other objects).
 */
type Waiter = (name: string | null) => void;

const known = new Map<string, string | null>();
const waiting = new Map<string, Waiter[]>();
const queued = new Map<string, Set<string>>();
let flush: Promise<void> | null = null;
/** Uuids per request: a URL of about 4 KB at most. */
const BATCH = 100;

const key = (kind: string, uuid: string) => `${kind}/${uuid}`;

/** Only kinds the console shows with a name column have names worth asking for (not IPs, not singletons). */
export const hasNames = (kind: string): boolean => {
  const def = kindOf(kind);
  return !!def && !def.singleton && def.columns.some((c) => c.key === 'name');
};

subscribe((e) => {
  if (e.uuid && e.resource_type) known.delete(key(e.resource_type, e.uuid));
});
onLiveState((s) => s === 'live' && forgetNames());

/** Drop every name known (a sign-in or sign-out). */
export function forgetNames(): void {
  known.clear();
}

async function ask(kind: string, uuids: string[]): Promise<void> {
  const found = new Map<string, string | null>();
  try {
    const answer = await get<ListAnswer<{ uuid: string; name?: string | null }>>(
      `${kind}/${query({ uuid: uuids.join(','), fields: 'uuid,name', limit: uuids.length })}`,
    );
    for (const o of answer.objects) found.set(o.uuid, typeof o.name === 'string' && o.name ? o.name : null);
  } catch {
    // Not shown here (no access, gone, offline): the page keeps the uuid, as it would without names.
  }
  for (const uuid of uuids) {
    const k = key(kind, uuid);
    const name = found.get(uuid) ?? null;
    known.set(k, name);
    for (const w of waiting.get(k) ?? []) w(name);
    waiting.delete(k);
  }
}

function send(): void {
  flush = null;
  const batches: Promise<void>[] = [];
  for (const [kind, uuids] of queued) {
    const all = [...uuids];
    for (let i = 0; i < all.length; i += BATCH) batches.push(ask(kind, all.slice(i, i + BATCH)));
  }
  queued.clear();
  void Promise.all(batches);
}

function nameOf(kind: string, uuid: string, then: Waiter): void {
  const k = key(kind, uuid);
  const list = waiting.get(k);
  if (list) return void list.push(then);
  waiting.set(k, [then]);
  let uuids = queued.get(kind);
  if (!uuids) queued.set(kind, (uuids = new Set()));
  uuids.add(uuid);
  // Everything a render asks for goes out together, after the render.
  flush ??= Promise.resolve().then(send);
}

/** The object's name once known (null: none, or not yet). */
export function useName(kind: string, uuid: string, wanted: boolean): string | null {
  const k = key(kind, uuid);
  const [name, setName] = useState<string | null>(() => known.get(k) ?? null);
  useEffect(() => {
    if (!wanted) return;
    if (known.has(k)) return void setName(known.get(k)!);
    let live = true;
    nameOf(kind, uuid, (n) => live && setName(n));
    return () => {
      live = false;
    };
  }, [k, wanted]);
  return wanted ? name : null;
}
