/**
 * JSON with keys sorted at every level, as the real API emits (tastypie `sort_keys=True`). Hand-rolled
 * because it runs on every response: one pass, no intermediate sorted copies.
 *
 * Objects presented once and reused across requests (see `frozen`) carry their serialisation with them:
 * the serializer writes a frozen part's stored text instead of walking it again, so each version of an
 * object is serialised once however often it is served.
 */

const serialised = new WeakMap<object, string>();

/**
 * A per-request object that is only its text (`preserialised`): a class instance, not a WeakMap entry, since a
 * page makes one per object per request and each WeakMap entry of a short-lived key is work for the collector.
 */
class Serialised {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
    Object.freeze(this);
  }
  static textOf(value: object): string | undefined {
    return value instanceof Serialised ? value.#text : serialised.get(value);
  }
}

/**
 * V8 keeps a string built with `+` as a tree of its pieces (a node of 32 bytes each, and the pieces): the
 * serialisations kept for reuse took 3-7x their text that way (a soak's object cache held ~3x its budget).
 * A regular expression match flattens its subject in place, into one copy of the characters.
 */
const FLATTEN = /^/;
export function flat(text: string): string {
  FLATTEN.test(text);
  return text;
}

/** Keys repeat across objects and requests: each is quoted once (bounded: only plain identifiers are kept). */
const quotedKeys = new Map<string, string>();
function quoted(key: string): string {
  let q = quotedKeys.get(key);
  if (q === undefined) {
    q = JSON.stringify(key);
    if (quotedKeys.size < 4096 && /^[A-Za-z0-9_]{1,64}$/.test(key)) quotedKeys.set(key, q);
  }
  return q;
}

export function sortedJson(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      const known = Serialised.textOf(value);
      if (known !== undefined) return known;
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i) out += ',';
          const item = value[i];
          out += item === undefined || typeof item === 'function' ? 'null' : sortedJson(item);
        }
        return out + ']';
      }
      const obj = value as Record<string, unknown>;
      const origin = copiedFrom.get(obj);
      if (origin) return copyJson(obj, origin);
      const keys = Object.keys(obj).sort();
      let out = '{';
      let first = true;
      for (const k of keys) {
        const v = obj[k];
        if (v === undefined || typeof v === 'function') continue;
        if (!first) out += ',';
        first = false;
        out += quoted(k) + ':' + sortedJson(v);
      }
      return out + '}';
    }
    default:
      return 'null';
  }
}

/** Per-request copies of frozen presented objects, and the sorted `"key":value` parts of those originals. */
const copiedFrom = new WeakMap<object, Record<string, unknown>>();
const partsOf = new WeakMap<object, { keys: string[]; parts: string[] }>();

/**
 * A shallow copy of a frozen object (made by `frozen`) for one request to add or replace keys on. Serialised,
 * the keys it shares with the original are written from the original's stored parts, in their sorted order,
 * with no sort and no walk; only the keys the request changed are serialised.
 */
export function copyOf(origin: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...origin };
  copiedFrom.set(copy, origin);
  return copy;
}

/** The sorted `"key":value` parts of a frozen object's top level, made once. */
function ownParts(origin: Record<string, unknown>): { keys: string[]; parts: string[] } {
  let own = partsOf.get(origin);
  if (!own) {
    const keys = Object.keys(origin)
      .filter((k) => origin[k] !== undefined && typeof origin[k] !== 'function')
      .sort();
    // A part of a primitive is flattened; one of an object refers to the object's own (flat) serialisation.
    const part = (k: string, v: unknown) => (v !== null && typeof v === 'object' ? quoted(k) + ':' + sortedJson(v) : flat(quoted(k) + ':' + sortedJson(v)));
    partsOf.set(origin, (own = { keys, parts: keys.map((k) => part(k, origin[k])) }));
  }
  return own;
}

function copyJson(obj: Record<string, unknown>, origin: Record<string, unknown>): string {
  const own = ownParts(origin);
  let added: string[] | undefined;
  for (const k in obj) if (!Object.hasOwn(origin, k)) (added ??= []).push(k);
  added?.sort();
  let out = '{';
  let first = true;
  const emit = (part: string) => {
    if (!first) out += ',';
    first = false;
    out += part;
  };
  const emitChanged = (k: string) => {
    const v = obj[k];
    if (v !== undefined && typeof v !== 'function') emit(quoted(k) + ':' + sortedJson(v));
  };
  let a = 0;
  for (let i = 0; i < own.keys.length; i++) {
    const k = own.keys[i];
    while (added && a < added.length && added[a] < k) emitChanged(added[a++]);
    if (!Object.hasOwn(obj, k)) continue;
    if (obj[k] === origin[k]) emit(own.parts[i]);
    else emitChanged(k);
  }
  while (added && a < added.length) emitChanged(added[a++]);
  return out + '}';
}

/**
 * Freezes `value` deeply and keeps the serialisation of every object and array inside it (not of the
 * top level, which a presenter copies to add per-request fields). Frozen, a shared part cannot be changed
 * by one request under another: an attempt throws instead of corrupting what every request serves.
 */
export function frozen<T extends object>(value: T): T {
  for (const v of Object.values(value)) if (v !== null && typeof v === 'object') freezeDeep(v as object);
  return Object.freeze(value);
}

/** `obj` cut to `keys` (`fields=`, a short list form); undefined keys: the whole object. */
export function project(obj: Record<string, unknown>, keys: readonly string[] | undefined): Record<string, unknown> {
  if (!keys) return obj;
  const out: Record<string, unknown> = {};
  for (const k of keys) if (k in obj) out[k] = obj[k];
  return out;
}

/**
 * An object already serialised (`text`, sorted JSON made by `sortedJson`): served as that text wherever it
 * is placed. It has no keys of its own: only for answers the caller serialises as JSON without looking in.
 */
export function preserialised(text: string): Record<string, unknown> {
  return new Serialised(text) as unknown as Record<string, unknown>;
}

/** Like `frozen`, and the value itself is served from its stored serialisation (a static answer). */
export function frozenWhole<T extends object>(value: T): T {
  freezeDeep(value);
  return value;
}

function freezeDeep(value: object): void {
  if (Object.isFrozen(value) && Serialised.textOf(value) !== undefined) return;
  for (const v of Object.values(value)) if (v !== null && typeof v === 'object') freezeDeep(v as object);
  Object.freeze(value);
  serialised.set(value, flat(sortedJson(value)));
}

/**
 * About the bytes a value made by `frozen` holds once served (a cache's budget counts it): its data and the
 * parts of its top level (twice its text), the serialisation of every object and array inside it (each
 * level's own copy), and what each value and object costs beside its characters. Checked with bench/soak.ts
 * and bench/heap-diff.ts --retained: a cache at its 32 MiB estimate retained 31.5 MiB, plus its share of the
 * WeakMap's table (the constants below cover that).
 */
export function frozenBytes(value: Record<string, unknown>): number {
  // Its text's length from the parts its copies are served from (made here once, not serialised twice).
  const { parts } = ownParts(value);
  let bytes = 2 * (parts.reduce((n, part) => n + part.length + 1, 0) + (parts.length ? 1 : 2));
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object') {
      bytes += VALUE_BYTES;
      return;
    }
    bytes += OBJECT_BYTES + (Serialised.textOf(v)?.length ?? 0);
    for (const x of Object.values(v)) walk(x);
  };
  for (const v of Object.values(value)) walk(v);
  return bytes;
}
/** A value beside its characters (a string's header, a number, its slot). */
const VALUE_BYTES = 40;
/** An object or array: its header and its entry in the WeakMap of serialisations (whose table keeps room for more). */
const OBJECT_BYTES = 160;
