import { useEffect, useState } from 'preact/hooks';
import { api, get, parseResourceUri, post, query, type ListAnswer, type Obj } from '../api.js';
import type { KindDef } from '../kinds.js';
import { ErrorBox } from '../parts/errors.js';
import form from '../parts/form.module.css';
import { href, navigate } from '../router.js';
import { schemaOf, type Schema } from '../schema.js';
import { useSubmit } from './signin.js';

/** The uuid of the object an answer (one object or `{objects: [one]}`) describes. */
function uuidOf(answer: unknown): string {
  const o = (answer as Obj).objects?.[0] ?? answer;
  return (o as Obj).uuid ?? parseResourceUri((o as Obj).resource_uri)?.uuid;
}

/**
 * The create form of a kind whose row lists plain `create` fields: one input per field, its type, choices
 * and help text from the kind's `schema/`; the values go to `POST <kind>/` as they are typed (numbers as
 * numbers), and the API's validation answers.
 */
export function CreatePage({ def }: { def: KindDef }) {
  const [schema, setSchema] = useState<Schema | null>(null);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  useEffect(() => {
    schemaOf(def.kind).then(setSchema, () => setSchema({}));
  }, [def.kind]);
  const fields = Array.isArray(def.create) ? def.create : [];
  const { busy, error, submit } = useSubmit(
    () => {
      const body: Obj = {};
      for (const f of fields) {
        const v = values[f];
        if (v === undefined || v === '') continue;
        body[f] = schema?.fields?.[f]?.type === 'integer' && typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
      }
      return post(`${def.kind}/`, body);
    },
    (answer) => {
      const o = (answer as Obj).objects?.[0] ?? answer;
      const key = def.idKey ? o?.[def.idKey] : uuidOf(answer);
      navigate(key !== undefined ? `${def.kind}/${key}` : def.kind);
    },
  );
  return (
    <section aria-labelledby="create-title">
      <h1 id="create-title">Create {def.label.toLowerCase().replace(/s$/, '')}</h1>
      <form class={form.form} onSubmit={submit}>
        {fields.map((f) => {
          const s = schema?.fields?.[f] ?? {};
          const set = (v: string | boolean) => setValues({ ...values, [f]: v });
          const label = f.replace(/_/g, ' ');
          const help = s.help_text ? `help-${f}` : undefined;
          if (s.type === 'boolean')
            return (
              <label key={f} class={form.check}>
                <input type="checkbox" checked={values[f] === true} onChange={(e) => set(e.currentTarget.checked)} />
                {label}
              </label>
            );
          return (
            <div key={f} class={form.field}>
              <label for={`field-${f}`}>{label}</label>
              {s.help_text ? (
                <span class={form.help} id={`help-${f}`}>
                  {s.help_text}
                </span>
              ) : null}
              {Array.isArray(s.choices) && s.choices.length ? (
                <select
                  id={`field-${f}`}
                  value={String(values[f] ?? '')}
                  onChange={(e) => set(e.currentTarget.value)}
                  required={!!s.required}
                  aria-describedby={help}
                >
                  <option value="">choose…</option>
                  {s.choices.map((c) => (
                    <option key={String(c)} value={String(c)}>
                      {String(c)}
                    </option>
                  ))}
                </select>
              ) : f === 'public_key' ? (
                <textarea id={`field-${f}`} rows={4} value={String(values[f] ?? '')} onInput={(e) => set(e.currentTarget.value)} aria-describedby={help} />
              ) : s.type === 'integer' ? (
                <input id={`field-${f}`} type="number" value={String(values[f] ?? '')} onInput={(e) => set(e.currentTarget.value)} aria-describedby={help} />
              ) : (
                <input id={`field-${f}`} type="text" value={String(values[f] ?? '')} onInput={(e) => set(e.currentTarget.value)} aria-describedby={help} />
              )}
            </div>
          );
        })}
        <ErrorBox error={error} />
        <div class={form.buttons}>
          <button type="submit" class={form.primary} disabled={busy}>
            Create
          </button>
          <a href={href(def.kind)}>Cancel</a>
        </div>
      </form>
    </section>
  );
}

const GiB = 1024 ** 3;

/**
 * A new server the way a user makes one: CPU, RAM, a boot drive (a new blank disk, a clone of a library
 * drive or of one of the account's drives, or none) and a NIC with a public IP by DHCP. Calls, in order:
 * the drive (`POST drives/` or `…/action/?do=clone`), then `POST servers/` with it attached.
 */
export function CreateServer() {
  const [name, setName] = useState('');
  const [cpu, setCpu] = useState('2000');
  const [mem, setMem] = useState('2');
  const [vnc, setVnc] = useState('');
  const [source, setSource] = useState<'new' | 'library' | 'mine' | 'none'>('new');
  const [size, setSize] = useState('10');
  const [from, setFrom] = useState('');
  const [dhcp, setDhcp] = useState(true);
  const [choices, setChoices] = useState<Obj[]>([]);
  useEffect(() => {
    setFrom('');
    if (source === 'library' || source === 'mine')
      get<ListAnswer>(`${source === 'library' ? 'libdrives' : 'drives'}/detail/${query({ limit: 0 })}`).then(
        (a) => setChoices(a.objects),
        () => setChoices([]),
      );
    else setChoices([]);
  }, [source]);
  const { busy, error, submit } = useSubmit(
    async () => {
      let drive: string | null = null;
      const driveName = `${name} disk`;
      if (source === 'new') drive = uuidOf(await post('drives/', { name: driveName, size: Math.round(Number(size) * GiB), media: 'disk' }));
      else if (source !== 'none') drive = uuidOf(await post(`${source === 'library' ? 'libdrives' : 'drives'}/${from}/action/?do=clone`, { name: driveName }));
      return api('POST', 'servers/', {
        name,
        cpu: Number(cpu),
        mem: Math.round(Number(mem) * GiB),
        vnc_password: vnc || Math.random().toString(36).slice(2, 10),
        drives: drive ? [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive }] : [],
        nics: dhcp ? [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }] : [],
      });
    },
    (answer) => navigate(`servers/${uuidOf(answer)}`),
  );
  return (
    <section aria-labelledby="create-title">
      <h1 id="create-title">Create server</h1>
      <form class={form.form} onSubmit={submit}>
        <label>
          Name
          <input type="text" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          CPU (MHz)
          <input type="number" min="250" step="250" required value={cpu} onInput={(e) => setCpu(e.currentTarget.value)} />
        </label>
        <label>
          RAM (GiB)
          <input type="number" min="0.25" step="0.25" required value={mem} onInput={(e) => setMem(e.currentTarget.value)} />
        </label>
        <label>
          VNC password
          <input type="text" value={vnc} placeholder="generated when empty" onInput={(e) => setVnc(e.currentTarget.value)} />
        </label>
        <fieldset class={form.fieldset}>
          <legend>Boot drive</legend>
          {(
            [
              ['new', 'A new blank drive'],
              ['library', 'A clone of a library drive'],
              ['mine', 'A clone of one of my drives'],
              ['none', 'No drive'],
            ] as const
          ).map(([v, text]) => (
            <label key={v} class={form.check}>
              <input type="radio" name="source" value={v} checked={source === v} onChange={() => setSource(v)} />
              {text}
            </label>
          ))}
          {source === 'new' ? (
            <label>
              Drive size (GiB)
              <input type="number" min="1" required value={size} onInput={(e) => setSize(e.currentTarget.value)} />
            </label>
          ) : source === 'none' ? null : (
            <label>
              Drive to clone
              <select required value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
                <option value="">choose…</option>
                {choices.map((d) => (
                  <option key={d.uuid} value={d.uuid}>
                    {d.name || d.uuid}
                  </option>
                ))}
              </select>
            </label>
          )}
        </fieldset>
        <label class={form.check}>
          <input type="checkbox" checked={dhcp} onChange={(e) => setDhcp(e.currentTarget.checked)} />A NIC with a public IP (DHCP)
        </label>
        <ErrorBox error={error} />
        <div class={form.buttons}>
          <button type="submit" class={form.primary} disabled={busy}>
            Create server
          </button>
          <a href={href('servers')}>Cancel</a>
        </div>
      </form>
    </section>
  );
}

/** An image file as a new drive: `POST drives/upload/<name>` with the bytes as the body (the API's plain upload). */
export function UploadPage() {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const { busy, error, submit } = useSubmit(
    async () => {
      if (!file) throw new Error('Choose a file');
      const answer = await api<unknown>('POST', `drives/upload/${encodeURIComponent(name || file.name)}`, undefined, {
        raw: file,
        contentType: 'application/octet-stream',
      });
      return typeof answer === 'string' ? answer.trim() : uuidOf(answer);
    },
    (uuid) => navigate(`drives/${uuid}`),
  );
  return (
    <section aria-labelledby="upload-title">
      <h1 id="upload-title">Upload an image</h1>
      <form class={form.form} onSubmit={submit}>
        <label>
          Image file
          <input type="file" required onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} />
        </label>
        <label>
          Drive name
          <input type="text" value={name} placeholder="the file's name when empty" onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <ErrorBox error={error} />
        <div class={form.buttons}>
          <button type="submit" class={form.primary} disabled={busy}>
            Upload
          </button>
        </div>
      </form>
    </section>
  );
}
