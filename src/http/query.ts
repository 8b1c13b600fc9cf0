import { validation } from '../core/errors.js';
import type { ListQuery } from '../core/resource.js';

export type RawQuery = Record<string, string | string[] | undefined>;

const all = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const last = (v: string | string[] | undefined): string | undefined => {
  const list = all(v);
  return list[list.length - 1];
};

function nonNegative(raw: string | undefined, name: 'limit' | 'offset', fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,9}$/.test(raw)) throw validation(name, `Invalid ${name} '${raw}' provided. Please provide a positive integer.`);
  return Number(raw);
}

/** Split one filter value on commas into OR alternatives; `\,` is a literal comma and `\\` a backslash. */
export function splitOr(value: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === '\\' && (value[i + 1] === ',' || value[i + 1] === '\\')) {
      cur += value[++i];
    } else if (c === ',') {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

/** `offset`/`limit` (limit=0 = all), and the declared filters: repeated parameter = AND, comma = OR. */
export function listQuery(q: RawQuery, defaultLimit: number, declared: Record<string, unknown>): ListQuery {
  const filters = new Map<string, string[][]>();
  for (const name of Object.keys(declared)) {
    const groups = all(q[name]).map(splitOr);
    if (groups.length) filters.set(name, groups);
  }
  return { filters, limit: nonNegative(last(q.limit), 'limit', defaultLimit), offset: nonNegative(last(q.offset), 'offset', 0) };
}

/** `fields=a,b` (repeatable): the keys every returned object is cut down to; undefined when not asked. */
export function fieldsParam(q: RawQuery): string[] | undefined {
  const list = all(q.fields)
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  return list.length ? list : undefined;
}

export { project } from '../core/json.js';
