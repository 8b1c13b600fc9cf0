import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ErrorBox } from '../parts/errors.js';
import { AdminError, accounts, adminToken, clock, faults, setAdminToken, type Account, type ClockState } from './admin-client.js';
import css from './operator.module.css';

/**
 * The operator's pages (pages.ts rows under "Operator"): the admin plane (docs/admin-plane.md) from a
 * browser, to drive a demo or debug a pipeline: the accounts and their balances, the simulated clock (shown,
 * moved forward), faults, reset. They hold the admin token, not the account's session: a page without one
 * asks for it first. Only what the admin plane offers; its errors are shown as it words them.
 */

/** An AdminError as the console's error box shows API errors. */
function Problem({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof AdminError) return <ErrorBox error={new Error(error.point ? `${error.point}: ${error.message}` : error.message)} />;
  return <ErrorBox error={error} />;
}

/** The token form, or the page once a token is there. */
function WithToken({ children }: { children: ComponentChildren }) {
  const [token, setToken] = useState(adminToken());
  const [draft, setDraft] = useState('');
  if (token)
    return (
      <>
        <p class={css.token}>
          Admin token set for this tab.{' '}
          <button
            type="button"
            onClick={() => {
              setAdminToken(null);
              setToken(null);
            }}
          >
            Forget it
          </button>
        </p>
        {children}
      </>
    );
  return (
    <form
      class={css.form}
      onSubmit={(e) => {
        e.preventDefault();
        setAdminToken(draft);
        setToken(adminToken());
      }}
    >
      <p>
        The operator pages use the admin plane, which needs the admin token (printed by <code>stratus serve</code> and written to its ready file) and answers
        clients on this machine only.
      </p>
      <label>
        Admin token <input name="admin-token" type="password" autoComplete="off" required value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
      </label>
      <button type="submit">Use token</button>
    </form>
  );
}

/** Runs an admin action, keeping its error and a busy flag. */
function useAction(): [(fn: () => Promise<unknown>) => Promise<void>, boolean, unknown, (e: unknown) => void] {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return [run, busy, error, setError];
}

function AccountsTable() {
  const [rows, setRows] = useState<Account[] | null>(null);
  const [run, busy, error] = useAction();
  const load = () => run(async () => setRows(await accounts.list()));
  useEffect(() => void load(), []);
  return (
    <>
      <Problem error={error} />
      <p>
        <button type="button" onClick={() => void load()} disabled={busy}>
          Refresh
        </button>{' '}
        <button
          type="button"
          disabled={busy}
          onClick={() => {
            if (confirm('Empty every account and all it owns? (The library, settings, clock and demo login stay.)'))
              void run(async () => {
                await accounts.reset();
                setRows(await accounts.list());
              });
          }}
        >
          Reset everything
        </button>
      </p>
      {rows ? (
        <table class={css.table} aria-label="Accounts">
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">State</th>
              <th scope="col">Balance</th>
              <th scope="col">Since</th>
              <th scope="col" />
            </tr>
          </thead>
          <tbody>
            {rows.map((a) => (
              <tr key={a.uuid} data-email={a.email}>
                <td>{a.email}</td>
                <td>{a.state}</td>
                <td class={css.num}>{a.balance === null ? '–' : `${a.balance} ${a.currency ?? ''}`}</td>
                <td>{a.created_at?.slice(0, 10) ?? ''}</td>
                <td>
                  <button
                    type="button"
                    disabled={busy}
                    onClick={() => {
                      if (confirm(`Empty ${a.email}'s account? (Its login, state and limits stay.)`))
                        void run(async () => {
                          await accounts.reset(a.email);
                          setRows(await accounts.list());
                        });
                    }}
                  >
                    Empty
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}

export function OperatorAccounts() {
  return (
    <section aria-labelledby="op-accounts-title">
      <h1 id="op-accounts-title">Accounts</h1>
      <WithToken>
        <AccountsTable />
      </WithToken>
    </section>
  );
}

const STEPS = ['5m', '1h', '1d', '30d'];

function ClockPanel() {
  const [state, setState] = useState<ClockState | null>(null);
  const [custom, setCustom] = useState('');
  const [run, busy, error] = useAction();
  useEffect(() => void run(async () => setState(await clock.get())), []);
  const advance = (by: string) => run(async () => setState(await clock.advance(by)));
  return (
    <div class={css.panel}>
      <h2>Simulated clock</h2>
      <Problem error={error} />
      <p>
        Now: <output aria-label="Simulated time">{state?.now ?? '…'}</output>
        {state ? ` (${Math.round(state.offset_ms / 1000)} s ahead of real time)` : ''}
        {state?.ran !== undefined ? `; the last move ran ${state.ran} timers` : ''}
      </p>
      <p class={css.row}>
        {STEPS.map((s) => (
          <button key={s} type="button" disabled={busy} onClick={() => void advance(s)}>
            +{s}
          </button>
        ))}
      </p>
      <form
        class={css.row}
        onSubmit={(e) => {
          e.preventDefault();
          void advance(custom);
        }}
      >
        <label>
          Advance by <input name="advance" placeholder="1h30m" value={custom} onInput={(e) => setCustom(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Advance
        </button>
      </form>
    </div>
  );
}

function FaultsPanel() {
  const [rules, setRules] = useState<Record<string, unknown>[] | null>(null);
  const [type, setType] = useState<'boot' | 'clone' | 'http'>('http');
  const [target, setTarget] = useState('');
  const [method, setMethod] = useState('POST');
  const [path, setPath] = useState('/api/2.0/servers/');
  const [count, setCount] = useState('1');
  const [kind, setKind] = useState('concurrency');
  const [note, setNote] = useState('');
  const [run, busy, error] = useAction();
  const reload = async () => setRules((await faults.list()).objects);
  useEffect(() => void run(reload), []);
  return (
    <div class={css.panel}>
      <h2>Faults</h2>
      <Problem error={error} />
      <form
        class={css.form}
        onSubmit={(e) => {
          e.preventDefault();
          const body =
            type === 'boot'
              ? { type, server: target }
              : type === 'clone'
                ? { type, ...(target ? { drive: target } : {}) }
                : { type, method, path, count: Number(count), error: kind };
          void run(async () => {
            const made = await faults.add(body);
            setNote(`Injected: ${JSON.stringify(made)}`);
            await reload();
          });
        }}
      >
        <label>
          Fault{' '}
          <select name="fault-type" value={type} onChange={(e) => setType(e.currentTarget.value as typeof type)}>
            <option value="http">HTTP answers fail</option>
            <option value="boot">a server&apos;s next boot fails</option>
            <option value="clone">a drive&apos;s next clone fails</option>
          </select>
        </label>
        {type === 'http' ? (
          <>
            <label>
              Method{' '}
              <select name="method" value={method} onChange={(e) => setMethod(e.currentTarget.value)}>
                {['*', 'GET', 'POST', 'PUT', 'DELETE'].map((m) => (
                  <option key={m}>{m}</option>
                ))}
              </select>
            </label>
            <label>
              Path prefix <input name="path" value={path} onInput={(e) => setPath(e.currentTarget.value)} />
            </label>
            <label>
              Count <input name="count" type="number" min="1" value={count} onInput={(e) => setCount(e.currentTarget.value)} />
            </label>
            <label>
              Answer{' '}
              <select name="error" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
                <option value="concurrency">503 concurrency</option>
                <option value="backend">500 backend</option>
              </select>
            </label>
          </>
        ) : (
          <label>
            {type === 'boot' ? 'Server uuid' : 'Drive uuid (empty: the next clone of any drive)'}{' '}
            <input name="target" value={target} required={type === 'boot'} onInput={(e) => setTarget(e.currentTarget.value)} />
          </label>
        )}
        <button type="submit" disabled={busy}>
          Inject
        </button>
      </form>
      {note ? <p role="status">{note}</p> : null}
      <h3>HTTP fault rules in force</h3>
      {rules && rules.length ? (
        <ul aria-label="HTTP fault rules">
          {rules.map((r, i) => (
            <li key={i}>
              <code>{JSON.stringify(r)}</code>
            </li>
          ))}
        </ul>
      ) : (
        <p>None.</p>
      )}
      <button
        type="button"
        disabled={busy || !rules?.length}
        onClick={() =>
          void run(async () => {
            const { cleared } = await faults.clear();
            setNote(`Cleared ${cleared} rule(s)`);
            await reload();
          })
        }
      >
        Clear HTTP faults
      </button>
    </div>
  );
}

export function OperatorControls() {
  return (
    <section aria-labelledby="op-controls-title">
      <h1 id="op-controls-title">Clock and faults</h1>
      <WithToken>
        <ClockPanel />
        <FaultsPanel />
      </WithToken>
    </section>
  );
}
