import { useEffect, useState } from 'preact/hooks';
import { get, query, type ListAnswer, type Obj } from '../api.js';
import { idOf, isShared, type KindDef } from '../kinds.js';
import { useLive } from '../live.js';
import { ErrorBox } from '../parts/errors.js';
import form from '../parts/form.module.css';
import { Cell } from '../parts/value.js';
import { href, navigate, useLocation } from '../router.js';
import { allows, schemaOf, type Schema } from '../schema.js';
import { useSession } from '../session.js';
import css from './list.module.css';

const PAGE = 20;

/**
 * The list page of any kind (kinds.ts): the API's own filters (its schema's `filtering`), a search by name,
 * paging with the API's `limit`/`offset`, and the columns of the kind's row. The state sits in the query
 * string; the list re-reads when the event stream reports a change of its kind (live.ts), not on a timer.
 */
export function ListPage({ def }: { def: KindDef }) {
  const { query: q } = useLocation();
  const { me } = useSession();
  const [schema, setSchema] = useState<Schema | null>(null);
  const [answer, setAnswer] = useState<ListAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  const offset = Number(q.get('offset') ?? 0) || 0;
  const filterKeys = Object.keys(schema?.filtering ?? {}).filter((k) => k !== def.search && k !== 'uuid');
  const params: Record<string, string> = {};
  for (const [k, v] of q) if (k !== 'offset') params[k] = v;
  const key = JSON.stringify(params) + offset;

  useEffect(() => {
    let stale = false;
    schemaOf(def.kind).then(
      (s) => !stale && setSchema(s),
      () => undefined,
    );
    return () => {
      stale = true;
    };
  }, [def.kind]);

  useEffect(() => {
    let stale = false;
    const path = `${def.kind}/${def.detailList ? 'detail/' : ''}${query({ ...params, limit: def.singleton ? 0 : PAGE, offset: def.singleton ? undefined : offset })}`;
    get<ListAnswer | Obj[]>(path).then(
      (a) => {
        if (stale) return;
        setError(null);
        setAnswer(Array.isArray(a) ? { meta: { limit: 0, offset: 0, total_count: a.length }, objects: a } : (a as ListAnswer));
      },
      (e) => !stale && setError(e),
    );
    return () => {
      stale = true;
    };
  }, [def.kind, key, tick]);

  useLive(
    (e) => !!def.live?.includes(e.resource_type),
    () => setTick((t) => t + 1),
  );

  const setParam = (k: string, v: string) => {
    const next = new URLSearchParams(q);
    if (v) next.set(k, v);
    else next.delete(k);
    next.delete('offset');
    const s = next.toString();
    navigate(`${def.kind}${s ? `?${s}` : ''}`, { replace: true });
  };
  const pageHref = (o: number) => {
    const next = new URLSearchParams(q);
    if (o) next.set('offset', String(o));
    else next.delete('offset');
    const s = next.toString();
    return href(`${def.kind}${s ? `?${s}` : ''}`);
  };
  const total = answer?.meta.total_count ?? 0;
  const canCreate = def.create && allows(schema?.allowed_list_http_methods, 'post');

  return (
    <section aria-labelledby="list-title">
      <div class={css.head}>
        <h1 id="list-title">{def.label}</h1>
        <div class={form.buttons}>
          {def.kind === 'drives' ? (
            <a class={form.secondary} href={href('drives/upload')}>
              Upload image
            </a>
          ) : null}
          {canCreate ? (
            <a class={form.primary} href={href(`${def.kind}/new`)}>
              Create
            </a>
          ) : null}
        </div>
      </div>
      {def.search || filterKeys.length ? (
        <form class={css.filters} role="search" aria-label={`Filter ${def.label.toLowerCase()}`} onSubmit={(e) => e.preventDefault()}>
          {def.search ? (
            <label>
              Search by name
              <input type="search" value={q.get(def.search) ?? ''} onChange={(e) => setParam(def.search!, e.currentTarget.value)} />
            </label>
          ) : null}
          {filterKeys.map((k) => (
            <label key={k}>
              {k}
              <input type="text" value={q.get(k) ?? ''} onChange={(e) => setParam(k, e.currentTarget.value)} />
            </label>
          ))}
        </form>
      ) : null}
      <ErrorBox error={error} />
      {answer ? (
        <>
          <div class={css.scroll}>
            <table class={css.table}>
              <caption class={css.caption}>
                {def.label}: {total} in all{total > PAGE && !def.singleton ? `, ${offset + 1}–${Math.min(offset + PAGE, total)} shown` : ''}
              </caption>
              <thead>
                <tr>
                  {def.columns.map((c) => (
                    <th key={c.key} scope="col">
                      {c.label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {answer.objects.map((o, i) => {
                  const id = idOf(def, o);
                  return (
                    <tr key={id ?? i}>
                      {def.columns.map((c, j) => (
                        <td key={c.key} data-label={c.label}>
                          {j === 0 && id !== undefined && !def.singleton ? (
                            <a href={href(`${def.kind}/${encodeURIComponent(id)}`)}>{String((c.get ? c.get(o) : o[c.key]) ?? id) || id}</a>
                          ) : (
                            <Cell v={c.get ? c.get(o) : o[c.key]} format={c.format} />
                          )}
                          {j === 0 && isShared(o, me) ? <span class={css.shared}> shared with you</span> : null}
                        </td>
                      ))}
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
          {!answer.objects.length ? <p>No {def.label.toLowerCase()} yet.</p> : null}
          {total > PAGE && !def.singleton ? (
            <nav class={css.pager} aria-label="Pages">
              {offset > 0 ? <a href={pageHref(Math.max(0, offset - PAGE))}>Previous page</a> : <span />}
              <span>
                Page {Math.floor(offset / PAGE) + 1} of {Math.ceil(total / PAGE)}
              </span>
              {offset + PAGE < total ? <a href={pageHref(offset + PAGE)}>Next page</a> : <span />}
            </nav>
          ) : null}
        </>
      ) : !error ? (
        <p aria-busy="true">Loading…</p>
      ) : null}
    </section>
  );
}
