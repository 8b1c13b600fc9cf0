import { useEffect, useState } from 'preact/hooks';
import { api, del, get, parseResourceUri, post, put, query, type ListAnswer, type Obj } from '../api.js';
import type { Action, KindDef } from '../kinds.js';
import { ErrorBox } from '../parts/errors.js';
import form from '../parts/form.module.css';
import { navigate } from '../router.js';
import { useSubmit } from './signin.js';
import css from './detail.module.css';

/** Where a call's answer (an object, or `{objects: [one]}`) lives in the console, if it names an object. */
function placeOf(answer: unknown): string | null {
  const o = (answer && typeof answer === 'object' ? ((answer as Obj).objects?.[0] ?? answer) : null) as Obj | null;
  const ref = parseResourceUri(o?.resource_uri);
  return ref ? `${ref.kind}/${ref.uuid}` : null;
}

const PERMISSIONS = ['LIST', 'EDIT', 'CLONE', 'ATTACH', 'START', 'STOP', 'OPEN_VNC', 'DELETE'];

/**
 * An object's actions from its kind's row (kinds.ts), each one call (or two) of the public API: buttons for
 * `action/?do=…`, a confirmation for deletes (with a server's `recurse` choice), small forms for firewall,
 * tag, share and snapshot. The API's answer decides: a refusal shows its error messages as they are.
 */
export function Actions({ def, obj, id, reload }: { def: KindDef; obj: Obj; id: string; reload: () => void }) {
  const [open, setOpen] = useState<string | null>(null);
  const actions = (def.actions ?? []).filter((a) => !a.when || a.when(obj));
  if (!actions.length) return null;
  const base = `${def.kind}/${encodeURIComponent(id)}/`;
  return (
    <div class={css.actions}>
      <div role="group" aria-label="Actions" class={form.buttons}>
        {actions.map((a) =>
          a.do ? (
            <DoButton key={a.label} a={a} base={base} reload={reload} />
          ) : (
            <button
              key={a.label}
              type="button"
              class={a.delete ? form.danger : form.secondary}
              aria-expanded={open === a.label}
              aria-controls="action-panel"
              onClick={() => setOpen(open === a.label ? null : a.label)}
            >
              {a.label}
            </button>
          ),
        )}
      </div>
      {open ? (
        <div id="action-panel" class={css.panel}>
          <ActionForm a={actions.find((x) => x.label === open)!} def={def} obj={obj} id={id} base={base} done={() => (setOpen(null), reload())} />
        </div>
      ) : null}
    </div>
  );
}

function DoButton({ a, base, reload }: { a: Action; base: string; reload: () => void }) {
  const { busy, error, submit } = useSubmit(
    () => post(`${base}action/${query({ do: a.do })}`),
    (answer) => {
      const place = a.after === 'new' ? placeOf(answer) : null;
      if (place) navigate(place);
      else reload();
    },
  );
  return (
    <span>
      <button type="button" class={form.secondary} disabled={busy} onClick={() => submit()}>
        {a.label}
      </button>
      <ErrorBox error={error} />
    </span>
  );
}

function ActionForm({ a, def, obj, id, base, done }: { a: Action; def: KindDef; obj: Obj; id: string; base: string; done: () => void }) {
  if (a.delete) return <DeleteForm a={a} def={def} base={base} />;
  switch (a.form) {
    case 'attach-firewall':
      return <FirewallForm obj={obj} base={base} done={done} />;
    case 'tag':
      return <TagForm id={id} done={done} />;
    case 'share':
      return <ShareForm obj={obj} id={id} done={done} />;
    case 'snapshot':
      return <SnapshotForm obj={obj} id={id} />;
    default:
      return null;
  }
}

function DeleteForm({ a, def, base }: { a: Action; def: KindDef; base: string }) {
  const [recurse, setRecurse] = useState('');
  const { busy, error, submit } = useSubmit(
    () => del(`${base}${query({ recurse })}`),
    () => navigate(def.kind),
  );
  return (
    <form class={form.form} onSubmit={submit}>
      <p>{a.confirm}</p>
      {a.delete?.recurse ? (
        <label>
          Also delete
          <select value={recurse} onChange={(e) => setRecurse(e.currentTarget.value)}>
            {a.delete.recurse.map((r) => (
              <option key={r} value={r}>
                {r === '' ? 'nothing else (detach the drives)' : r === 'all_drives' ? 'all its drives' : r === 'disks' ? 'its disks' : 'its CD-ROMs'}
              </option>
            ))}
          </select>
        </label>
      ) : null}
      <ErrorBox error={error} />
      <div class={form.buttons}>
        <button type="submit" class={form.danger} disabled={busy}>
          Confirm delete
        </button>
      </div>
    </form>
  );
}

/** Every object of a kind (limit=0) for a choice, or null while loading. */
function useAll(kind: string): Obj[] | null {
  const [all, setAll] = useState<Obj[] | null>(null);
  useEffect(() => {
    get<ListAnswer>(`${kind}/detail/?limit=0`).then(
      (a) => setAll(a.objects),
      () => setAll([]),
    );
  }, [kind]);
  return all;
}

const refUuid = (v: unknown): string | null => (v && typeof v === 'object' ? ((v as Obj).uuid ?? null) : typeof v === 'string' ? v : null);

function FirewallForm({ obj, base, done }: { obj: Obj; base: string; done: () => void }) {
  const policies = useAll('fwpolicies');
  const nics = (obj.nics ?? []) as Obj[];
  const [nic, setNic] = useState('0');
  const [policy, setPolicy] = useState('');
  const { busy, error, submit } = useSubmit(
    () =>
      put(base, {
        nics: nics.map((n, i) => ({
          ip_v4_conf: n.ip_v4_conf ?? null,
          ip_v6_conf: n.ip_v6_conf ?? null,
          model: n.model,
          mac: n.mac,
          vlan: refUuid(n.vlan),
          firewall_policy: String(i) === nic ? policy || null : refUuid(n.firewall_policy),
        })),
      }),
    done,
  );
  if (!nics.length) return <p>This server has no NIC.</p>;
  return (
    <form class={form.form} onSubmit={submit}>
      <label>
        NIC
        <select value={nic} onChange={(e) => setNic(e.currentTarget.value)}>
          {nics.map((n, i) => (
            <option key={i} value={String(i)}>
              NIC {i + 1} {n.mac ?? ''} {n.runtime?.ip_v4?.uuid ?? (n.vlan ? 'VLAN' : '')}
            </option>
          ))}
        </select>
      </label>
      <label>
        Firewall policy
        <select value={policy} onChange={(e) => setPolicy(e.currentTarget.value)}>
          <option value="">none</option>
          {(policies ?? []).map((p) => (
            <option key={p.uuid} value={p.uuid}>
              {p.name || p.uuid}
            </option>
          ))}
        </select>
      </label>
      <ErrorBox error={error} />
      <div class={form.buttons}>
        <button type="submit" class={form.primary} disabled={busy}>
          Save firewall policy
        </button>
      </div>
    </form>
  );
}

function TagForm({ id, done }: { id: string; done: () => void }) {
  const tags = useAll('tags');
  const [tag, setTag] = useState('');
  const [name, setName] = useState('');
  const { busy, error, submit } = useSubmit(async () => {
    if (tag) {
      const t = await get(`tags/${tag}/`);
      return put(`tags/${tag}/`, { resources: [...((t.resources ?? []) as unknown[]).map(refUuid), id] });
    }
    return post('tags/', { name, resources: [id] });
  }, done);
  return (
    <form class={form.form} onSubmit={submit}>
      <label>
        Existing tag
        <select value={tag} onChange={(e) => setTag(e.currentTarget.value)}>
          <option value="">a new tag</option>
          {(tags ?? []).map((t) => (
            <option key={t.uuid} value={t.uuid}>
              {t.name || t.uuid}
            </option>
          ))}
        </select>
      </label>
      {tag ? null : (
        <label>
          New tag name
          <input type="text" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
      )}
      <ErrorBox error={error} />
      <div class={form.buttons}>
        <button type="submit" class={form.primary} disabled={busy}>
          Add tag
        </button>
      </div>
    </form>
  );
}

/** Sharing is the API's way: a tag holding the object, and an ACL granting that tag to a user. */
function ShareForm({ obj, id, done }: { obj: Obj; id: string; done: () => void }) {
  const [email, setEmail] = useState('');
  const [perms, setPerms] = useState<string[]>(['LIST']);
  const { busy, error, submit } = useSubmit(async () => {
    const label = String(obj.name || id);
    const tag = await post<ListAnswer>('tags/', { name: `shared: ${label}`, resources: [id] });
    return post('acls/', {
      name: `${label} for ${email}`,
      grantees: [{ email }],
      rules: perms.map((permission) => ({ permission })),
      tags: [tag.objects[0].uuid],
    });
  }, done);
  return (
    <form class={form.form} onSubmit={submit}>
      <label>
        Share with (e-mail of another account)
        <input type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </label>
      <fieldset class={form.fieldset}>
        <legend>Permissions</legend>
        {PERMISSIONS.map((p) => (
          <label key={p} class={form.check}>
            <input
              type="checkbox"
              checked={perms.includes(p)}
              onChange={(e) => setPerms(e.currentTarget.checked ? [...perms, p] : perms.filter((x) => x !== p))}
            />
            {p}
          </label>
        ))}
      </fieldset>
      <ErrorBox error={error} />
      <div class={form.buttons}>
        <button type="submit" class={form.primary} disabled={busy}>
          Share
        </button>
      </div>
    </form>
  );
}

function SnapshotForm({ obj, id }: { obj: Obj; id: string }) {
  const [name, setName] = useState(`${String(obj.name || 'drive')} snapshot`);
  const { busy, error, submit } = useSubmit(
    () => api('POST', 'snapshots/', { drive: id, name }),
    (answer) => {
      const place = placeOf(answer);
      if (place) navigate(place);
    },
  );
  return (
    <form class={form.form} onSubmit={submit}>
      <label>
        Snapshot name
        <input type="text" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <ErrorBox error={error} />
      <div class={form.buttons}>
        <button type="submit" class={form.primary} disabled={busy}>
          Take the snapshot
        </button>
      </div>
    </form>
  );
}
