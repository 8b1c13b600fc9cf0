import { get, type Obj } from './api.js';

/** A kind's `schema/` (its fields with type, choices, readonly; its `filtering`), read once a page load. */
export interface Schema {
  fields?: Record<string, { type?: string; readonly?: boolean; required?: boolean; choices?: unknown[]; default?: unknown; help_text?: string }>;
  filtering?: Record<string, unknown> | null;
  allowed_list_http_methods?: string[] | string;
  allowed_detail_http_methods?: string[] | string;
}

const cache = new Map<string, Promise<Schema>>();

export function schemaOf(kind: string): Promise<Schema> {
  let p = cache.get(kind);
  if (!p) {
    p = get<Obj>(`${kind}/schema/`).then((s) => s as Schema);
    p.catch(() => cache.delete(kind));
    cache.set(kind, p);
  }
  return p;
}

export const allows = (methods: string[] | string | undefined, m: string): boolean =>
  Array.isArray(methods) ? methods.includes(m) : typeof methods === 'string' ? methods === m : false;
