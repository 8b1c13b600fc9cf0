/** The serializer lives in core (presenters keep serialised parts); the HTTP layer uses it from here. */
export { sortedJson } from '../core/json.js';

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
