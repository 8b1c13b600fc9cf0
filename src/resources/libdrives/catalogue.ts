import { readFileSync } from 'node:fs';
import { assetPath } from '../../assets.js';
import type { Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { isPlainObject, validateFields, type Obj } from '../../core/input.js';
import { libdriveFields } from './fields.js';

/**
 * The library catalogue: a JSON file of library drives (the built-in `catalogue.json`, or the operator's
 * own through `--libdrives`), read and checked when the configuration loads, and written into the
 * `resources` table (kind `libdrives`, no owner) once at start-up by `syncLibrary`.
 */
export const BUILTIN_CATALOGUE = assetPath('resources/libdrives/catalogue.json');

export interface LibraryEntry {
  uuid: string;
  /** The stored body: every field of a library drive except uuid, owner and resource_uri. */
  body: Obj;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Fields a catalogue entry must give (the rest have defaults). */
const REQUIRED = ['arch', 'image_type', 'media', 'name', 'os', 'size'] as const;
/** Read-only keys an entry may carry (a pasted `GET /libdrives/` answer has them); their values are ignored. */
const IGNORED = new Set(['jobs', 'mounted_on', 'owner', 'resource_uri', 'runtime', 'status', 'storage_type', 'tags']);

/** One catalogue entry, checked against the library drive fields, as the body to store. */
function entryBody(raw: unknown, where: string): LibraryEntry {
  if (!isPlainObject(raw)) throw new Error(`${where} is not an object`);
  const uuid = raw.uuid;
  if (typeof uuid !== 'string' || !UUID.test(uuid)) throw new Error(`${where}: "uuid" must be a UUID like 6eca8d96-44bc-4637-af97-77ccd7ba4144`);
  const at = `${where} (${uuid})`;
  for (const key of Object.keys(raw))
    if (!(key in libdriveFields) && !IGNORED.has(key)) throw new Error(`${at}: unknown field "${key}" (fields: ${Object.keys(libdriveFields).join(', ')})`);
  for (const key of REQUIRED) if (raw[key] === undefined || raw[key] === null) throw new Error(`${at}: "${key}" is required`);
  let v: Obj;
  try {
    v = validateFields(libdriveFields, raw, 'update');
  } catch (e) {
    if (e instanceof ApiError) throw new Error(`${at}: "${e.point}": ${e.message}`, { cause: e });
    throw e;
  }
  if (v.name === '') throw new Error(`${at}: "name" must not be empty`);
  const licenses = ((v.licenses as unknown[] | undefined) ?? []).map((l, i) => {
    if (!isPlainObject(l) || !isPlainObject(l.license)) throw new Error(`${at}: licenses[${i}] must be {"amount": 1, "license": {...}, "user": null}`);
    const amount = l.amount ?? 1;
    if (!Number.isInteger(amount) || (amount as number) < 1) throw new Error(`${at}: licenses[${i}].amount must be a positive integer`);
    return { amount, license: l.license, user: l.user ?? null };
  });
  return {
    uuid: uuid.toLowerCase(),
    body: {
      affinities: v.affinities ?? [],
      allow_multimount: v.allow_multimount ?? false,
      arch: v.arch,
      category: v.category ?? [],
      description: v.description ?? null,
      distribution: v.distribution ?? null,
      favourite: v.favourite ?? false,
      image_type: v.image_type,
      install_notes: v.install_notes ?? null,
      jobs: [],
      licenses,
      media: v.media,
      meta: v.meta ?? {},
      mounted_on: [],
      name: v.name,
      os: v.os,
      paid: v.paid ?? false,
      size: v.size,
      status: 'unmounted',
      storage_type: null,
      tags: [],
      url: v.url ?? null,
      version: v.version ?? null,
    },
  };
}

/** Parse a catalogue: a JSON list of library drives, or a list envelope `{"objects": [...]}`. */
export function parseCatalogue(text: string): LibraryEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`not valid JSON: ${(e as Error).message}`, { cause: e });
  }
  const list = isPlainObject(parsed) && Array.isArray(parsed.objects) ? parsed.objects : parsed;
  if (!Array.isArray(list)) throw new Error('must be a JSON list of library drives (or {"objects": [...]})');
  const entries = list.map((raw, i) => entryBody(raw, `entry ${i}`));
  const seen = new Set<string>();
  for (const e of entries) {
    if (seen.has(e.uuid)) throw new Error(`uuid ${e.uuid} appears twice`);
    seen.add(e.uuid);
  }
  return entries;
}

/** Read and check a catalogue file; errors name the file. */
export function readCatalogue(path: string): LibraryEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read library catalogue ${path}: ${(e as Error).message}`, { cause: e });
  }
  try {
    return parseCatalogue(text);
  } catch (e) {
    throw new Error(`library catalogue ${path}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Make the stored library match the configured catalogue: insert new entries, rewrite changed ones, remove
 * those no longer listed. Idempotent (an unchanged catalogue writes nothing) and safe when several API
 * processes start together on one PostgreSQL database (inserts of the same uuid collapse on the unique key).
 * Drives already cloned from a removed entry stay; they are the users' own.
 */
export async function syncLibrary(s: Services): Promise<{ added: number; changed: number; removed: number }> {
  const entries = s.config.libdrives;
  const repo = s.store.resources;
  return s.store.transaction(async (tx) => {
    const stored = await repo.ownerless(tx, 'libdrives');
    const byUuid = new Map(stored.map((r) => [r.uuid, r]));
    const now = s.clock.now();
    let added = 0;
    let changed = 0;
    for (const e of entries) {
      const row = byUuid.get(e.uuid);
      if (!row) {
        if (await repo.insertIfAbsent(tx, now, { kind: 'libdrives', uuid: e.uuid, owner: null, body: e.body })) added++;
      } else if (JSON.stringify(row.body) !== JSON.stringify(e.body)) {
        await repo.write(tx, now, row, e.body);
        changed++;
      }
    }
    const keep = new Set(entries.map((e) => e.uuid));
    const gone = stored.filter((r) => !keep.has(r.uuid)).map((r) => r.uuid);
    await repo.remove(tx, 'libdrives', gone);
    return { added, changed, removed: gone.length };
  });
}
