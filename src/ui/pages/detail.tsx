import { useEffect, useState } from 'preact/hooks';
import { get, type Obj } from '../api.js';
import type { KindDef } from '../kinds.js';
import { useLive } from '../live.js';
import { ErrorBox } from '../parts/errors.js';
import { Cell, Fields } from '../parts/value.js';
import { href } from '../router.js';
import { Actions } from './actions.js';
import css from './detail.module.css';

/**
 * The detail page of any kind (kinds.ts): the object's fields as the API answers them (JSON, keys in the
 * API's order), every reference a link, the kind's actions, re-read when the event stream names this object.
 */
export function DetailPage({ def, id }: { def: KindDef; id: string }) {
  const [obj, setObj] = useState<Obj | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stale = false;
    get(`${def.kind}/${encodeURIComponent(id)}/`).then(
      (o) => {
        if (stale) return;
        setObj(o);
        setError(null);
      },
      (e) => !stale && setError(e),
    );
    return () => {
      stale = true;
    };
  }, [def.kind, id, tick]);
  const reload = () => setTick((t) => t + 1);
  useLive((e) => e.uuid === id || (!!def.live?.includes(e.resource_type) && !e.uuid), reload);
  const title = obj && typeof obj.name === 'string' && obj.name ? obj.name : id;
  return (
    <section aria-labelledby="detail-title">
      <nav aria-label="Breadcrumb" class={css.crumbs}>
        <a href={href(def.kind)}>{def.label}</a> / <span aria-current="page">{title}</span>
      </nav>
      <h1 id="detail-title">{title}</h1>
      <ErrorBox error={error} />
      {obj ? (
        <>
          <dl class={css.summary} aria-label="Summary">
            {def.columns.map((c) => (
              <div key={c.key}>
                <dt>{c.label}</dt>
                <dd>
                  <Cell v={c.get ? c.get(obj) : obj[c.key]} format={c.format} />
                </dd>
              </div>
            ))}
          </dl>
          <Actions def={def} obj={obj} id={id} reload={reload} />
          <h2>Fields</h2>
          <Fields obj={obj} related={def.related} />
        </>
      ) : !error ? (
        <p aria-busy="true">Loading…</p>
      ) : null}
    </section>
  );
}
