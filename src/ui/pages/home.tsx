import { useEffect, useState } from 'preact/hooks';
import { get, type Obj } from '../api.js';
import { KINDS } from '../kinds.js';
import { useLive } from '../live.js';
import { ErrorBox } from '../parts/errors.js';
import { href } from '../router.js';
import css from './home.module.css';

/** The account's balance (live: the event stream reports `balance` changes) and a way to every kind. */
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
        <output aria-live="polite" aria-label="Balance">
          {balance ? `${balance.balance} ${balance.currency}` : '…'}
        </output>
      </p>
      <ul class={css.grid}>
        {KINDS.map((k) => (
          <li key={k.kind}>
            <a href={href(k.kind)}>{k.label}</a>
          </li>
        ))}
      </ul>
    </section>
  );
}
