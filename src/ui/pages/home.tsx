import { useEffect, useState } from 'preact/hooks';
import { get, query, type ListAnswer, type Obj } from '../api.js';
import { KINDS, type KindDef } from '../kinds.js';
import { useLive } from '../live.js';
import { ErrorBox } from '../parts/errors.js';
import { money } from '../parts/money.js';
import { href } from '../router.js';
import css from './home.module.css';

/** Kinds with a count worth showing: lists of the account's objects (not a singleton's settings). */
const COUNTED = KINDS.filter((k) => !k.singleton);

/**
 * The account's balance and a tile per kind with how many objects it has (each list's `total_count`, one
 * `?limit=1` request a kind). Both are live: the event stream reports `balance` changes and changes of each
 * kind's objects, and the page asks again.
 */
export function Overview() {
  const [balance, setBalance] = useState<Obj | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    get('balance/').then(setBalance, setError);
  }, [tick]);
  useLive(
    (e) => e.resource_type === 'balance',
    () => setTick((t) => t + 1),
  );
  return (
    <section aria-labelledby="home-title">
      <h1 id="home-title">Overview</h1>
      <ErrorBox error={error} />
      <p class={css.balance}>
        Balance:{' '}
        <output aria-live="polite" aria-label="Balance" title={balance ? String(balance.balance) : undefined}>
          {balance ? `${money(balance.balance)} ${balance.currency}` : '…'}
        </output>
      </p>
      <ul class={css.grid}>
        {KINDS.map((k) => (
          <li key={k.kind}>
            <a href={href(k.kind)}>
              <span>{k.label}</span>
              {COUNTED.includes(k) && <Count def={k} />}
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** How many objects of a kind the account sees (its own and those shared with it), kept current by the stream. */
function Count({ def }: { def: KindDef }) {
  const [count, setCount] = useState<number | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    get<ListAnswer>(`${def.kind}/${query({ limit: 1 })}`).then(
      (a) => live && setCount(a.meta.total_count),
      () => live && setCount(null),
    );
    return () => {
      live = false;
    };
  }, [def.kind, tick]);
  useLive(
    (e) => !!def.live?.includes(e.resource_type),
    () => setTick((t) => t + 1),
  );
  return (
    <span class={css.count} aria-label={`${def.label}: ${count ?? 'unknown'}`}>
      {count ?? '…'}
    </span>
  );
}
