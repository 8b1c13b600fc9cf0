import type { ComponentChildren } from 'preact';
import { parseResourceUri, type Obj } from '../api.js';
import { kindOf, type Format } from '../kinds.js';
import { href } from '../router.js';
import { money } from './money.js';
import { hasNames, useName } from './names.js';
import css from './value.module.css';

/**
 * A link to an object's detail page when the console shows its kind; its uuid as text otherwise. Without a
 * label it shows the object's name once known (parts/names.ts), with the uuid as the link's title.
 */
export function Ref({ kind, uuid, label }: { kind: string; uuid: string; label?: string }) {
  const def = kindOf(kind);
  const name = useName(kind, uuid, label === undefined && hasNames(kind));
  const text = label ?? name ?? uuid;
  if (!def || def.singleton) return <span class={css.mono}>{text}</span>;
  return (
    <a href={href(`${kind}/${encodeURIComponent(uuid)}`)} class={text === uuid ? css.mono : undefined} title={text === uuid ? undefined : uuid}>
      {text}
    </a>
  );
}

/** A reference of the API (`{resource_uri, uuid}`, a bare resource URI, or a uuid of a known kind) as a link, or null. */
export function asRef(v: unknown, kindHint?: string): ComponentChildren | null {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Obj;
    const parsed = parseResourceUri(o.resource_uri);
    if (parsed) return <Ref kind={parsed.kind} uuid={parsed.uuid} label={typeof o.name === 'string' && o.name ? o.name : undefined} />;
    if (kindHint && typeof o.uuid === 'string') return <Ref kind={kindHint} uuid={o.uuid} />;
    return null;
  }
  const parsed = parseResourceUri(v);
  if (parsed) return <Ref kind={parsed.kind} uuid={parsed.uuid} />;
  if (kindHint && typeof v === 'string' && v) return <Ref kind={kindHint} uuid={v} />;
  return null;
}

export function bytes(n: unknown): string {
  if (typeof n !== 'number') return n === null || n === undefined ? '—' : String(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}

const STATUS_CLASS: Record<string, string | undefined> = {
  running: css.ok,
  mounted: css.ok,
  unmounted: css.idle,
  available: css.ok,
  active: css.ok,
  stopped: css.idle,
  starting: css.busy,
  stopping: css.busy,
  creating: css.busy,
  cloning_src: css.busy,
  cloning_dst: css.busy,
  uploading: css.busy,
  resizing: css.busy,
  unavailable: css.bad,
  error: css.bad,
};

/** Any JSON value of an object as the API gave it: references become links, lists and dicts nested lists. */
export function Value({ v, kindHint, depth = 0 }: { v: unknown; kindHint?: string; depth?: number }) {
  if (v === null || v === undefined || v === '') return <span class={css.none}>—</span>;
  const ref = asRef(v, kindHint);
  if (ref) return <>{ref}</>;
  if (Array.isArray(v)) {
    if (!v.length) return <span class={css.none}>none</span>;
    return (
      <ul class={css.list}>
        {v.map((x, i) => (
          <li key={i}>
            <Value v={x} kindHint={kindHint} depth={depth + 1} />
          </li>
        ))}
      </ul>
    );
  }
  if (typeof v === 'object') {
    const entries = Object.entries(v as Obj);
    if (!entries.length) return <span class={css.none}>{'{}'}</span>;
    return <Fields obj={v as Obj} depth={depth + 1} />;
  }
  if (typeof v === 'boolean') return <>{v ? 'yes' : 'no'}</>;
  // A number is never broken across lines (a narrow nested column would put a digit on each).
  if (typeof v === 'number') return <span class={css.number}>{v}</span>;
  return <span class={css.text}>{String(v)}</span>;
}

/** An object's fields as a description list, keys in the API's (sorted) order. */
export function Fields({ obj, depth = 0, related = {} }: { obj: Obj; depth?: number; related?: Record<string, string> }) {
  return (
    <dl class={depth ? css.nested : css.fields}>
      {Object.entries(obj).map(([k, v]) => (
        <div key={k} class={css.row}>
          <dt>{k}</dt>
          <dd>
            {/* An object's own resource_uri is its address: shown as such, not as its name. */}
            {k === 'resource_uri' && typeof v === 'string' ? <span class={css.mono}>{v}</span> : <Value v={v} kindHint={related[k]} depth={depth} />}
          </dd>
        </div>
      ))}
    </dl>
  );
}

/** One list cell in its column's format. */
export function Cell({ v, format = 'text' }: { v: unknown; format?: Format }) {
  switch (format) {
    case 'status':
      return typeof v === 'string' ? <span class={`${css.status} ${STATUS_CLASS[v] ?? ''}`}>{v}</span> : <Value v={v} />;
    case 'bytes':
      return <>{bytes(v)}</>;
    case 'mhz':
      return <>{typeof v === 'number' ? `${(v / 1000).toFixed(v % 1000 ? 1 : 0)} GHz` : '—'}</>;
    case 'count':
      return <>{Array.isArray(v) ? v.length : '—'}</>;
    case 'bool':
      return <>{v === true ? 'yes' : v === false ? 'no' : '—'}</>;
    case 'time':
      return typeof v === 'string' ? <time dateTime={v}>{v.replace(/\.\d+/, '').replace(/\+00:00$/, ' UTC')}</time> : <Value v={v} />;
    case 'money':
      return <span title={typeof v === 'string' ? v : undefined}>{money(v)}</span>;
    case 'ref':
      return <Value v={v} />;
    case 'refs':
      return Array.isArray(v) && v.length ? (
        <span class={css.refs}>
          {v.map((x, i) => (
            <span key={i}>
              <Value v={x} />
            </span>
          ))}
        </span>
      ) : (
        <span class={css.none}>—</span>
      );
    case 'ips': {
      const ips: string[] = [];
      for (const nic of Array.isArray(v) ? (v as Obj[]) : []) {
        const a = nic?.runtime?.ip_v4?.uuid ?? nic?.ip_v4_conf?.ip?.uuid;
        if (a) ips.push(a);
        if (nic?.vlan?.uuid) ips.push(`VLAN ${String(nic.vlan.uuid).slice(0, 8)}`);
      }
      return ips.length ? <span class={css.mono}>{ips.join(', ')}</span> : <span class={css.none}>—</span>;
    }
    default:
      return <Value v={v} />;
  }
}
