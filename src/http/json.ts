/**
 * JSON with keys sorted at every level, as the real API emits (tastypie `sort_keys=True`).
 * Hand-rolled because it runs on every response: one pass, no intermediate sorted copies.
 */
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
      const keys = Object.keys(obj).sort();
      let out = '{';
      let first = true;
      for (const k of keys) {
        const v = obj[k];
        if (v === undefined || typeof v === 'function') continue;
        if (!first) out += ',';
        first = false;
        out += JSON.stringify(k) + ':' + sortedJson(v);
      }
      return out + '}';
    }
    default:
      return 'null';
  }
}

/** A `\0` ends a string (spec: "The character \0 terminates a string"): cut it and everything after, in keys too. */
export function truncateAtNul(value: unknown): unknown {
  if (typeof value === 'string') {
    const i = value.indexOf('\0');
    return i === -1 ? value : value.slice(0, i);
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = truncateAtNul(value[i]);
    return value;
  }
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    for (const k of Object.keys(obj)) {
      const v = truncateAtNul(obj[k]);
      const nk = truncateAtNul(k) as string;
      if (nk !== k) delete obj[k];
      obj[nk] = v;
    }
  }
  return value;
}
