import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, type ListAnswer } from '../api.js';
import { useLive } from '../live.js';
import { ErrorBox } from '../parts/errors.js';
import { Chart, type SeriesSpec } from './chart.js';
import {
  balanceOverTime,
  burstResources,
  formatAmount,
  levelsOf,
  spendingPerDay,
  USAGE_GROUPS,
  usageByGroup,
  type BurstRecord,
  type LedgerEntry,
  type Pricing,
  type UsageRecord,
} from './series.js';
import css from './charts.module.css';

/**
 * The chart pages (pages.ts rows under "Charts"): balance and spending from the ledger, usage per resource
 * from the usage records and burst usage, and the burst level per resource against its price levels. Each
 * reads the API once and again when the event stream reports a change of the account's `balance` (every
 * billing poll that charges changes it), so a page left open follows the simulated clock.
 */

/** How many of the newest records a chart reads (a day of 5-minute polls of a few resources fits). */
export const CHART_LIMIT = 2000;

/** Loads `load()` now and whenever the balance changes; returns [data, error]. */
function useBillingData<T>(load: () => Promise<T>): [T | null, unknown] {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (d) => live && (setData(d), setError(null)),
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [tick]);
  useLive(
    (e) => e.resource_type === 'balance',
    () => setTick((t) => t + 1),
  );
  return [data, error];
}

const money = (currency: string) => (n: number) => `${+n.toFixed(2)} ${currency}`.trim();
const BALANCE: SeriesSpec[] = [{ label: 'Balance', stroke: '#1d4ed8', fill: 'rgba(29, 78, 216, 0.08)', stepped: true }];
const SPENDING: SeriesSpec[] = [
  { label: 'Spent', stroke: '#dc2626', fill: 'rgba(220, 38, 38, 0.12)' },
  { label: 'Paid in', stroke: '#059669', dash: [6, 4] },
];

export function BalanceCharts() {
  const [data, error] = useBillingData(async () => {
    const [ledger, balance] = await Promise.all([
      get<ListAnswer<LedgerEntry>>(`ledger/?limit=${CHART_LIMIT}`),
      get<{ balance: string; currency: string }>('balance/'),
    ]);
    return { ledger, balance };
  });
  const balance = useMemo(() => (data ? balanceOverTime(data.ledger.objects) : null), [data]);
  const spending = useMemo(() => (data ? spendingPerDay(data.ledger.objects) : null), [data]);
  const currency = data?.balance.currency ?? '';
  const fmt = useMemo(() => money(currency), [currency]);
  const entries = data?.ledger.objects.length ?? 0;
  const total = data?.ledger.meta.total_count ?? 0;
  return (
    <section aria-labelledby="charts-balance-title">
      <h1 id="charts-balance-title">Balance and spending</h1>
      <ErrorBox error={error} />
      {data && balance && spending ? (
        <>
          <p class={css.note}>
            Balance now: <output aria-label="Balance now">{`${data.balance.balance} ${currency}`}</output>. From the ledger&apos;s{' '}
            {entries < total ? `newest ${entries} of ${total}` : `${entries}`} entries.
          </p>
          <Chart
            id="chart-balance"
            title="Balance over time"
            columns={balance}
            series={BALANCE}
            format={fmt}
            summary={balance[0].length ? `${balance[0].length} points, last ${fmt(balance[1][balance[1].length - 1] ?? 0)}` : 'no ledger entries'}
          />
          <Chart
            id="chart-spending"
            title="Spending per day"
            columns={spending}
            series={SPENDING}
            format={fmt}
            summary={spending[0].length ? `${spending[0].length} days` : 'no ledger entries'}
          />
        </>
      ) : error ? null : (
        <p>Loading…</p>
      )}
    </section>
  );
}

const USAGE_SERIES: SeriesSpec[] = [
  { label: 'Used', stroke: '#1d4ed8', fill: 'rgba(29, 78, 216, 0.08)' },
  { label: 'Burst (beyond subscriptions)', stroke: '#d97706', fill: 'rgba(217, 119, 6, 0.12)' },
];

export function UsageCharts() {
  const [data, error] = useBillingData(async () => {
    const [usage, burst] = await Promise.all([
      get<ListAnswer<UsageRecord>>(`usage/?limit=${CHART_LIMIT}`),
      get<ListAnswer<BurstRecord>>(`burstusage/?limit=${CHART_LIMIT}`),
    ]);
    return usageByGroup(usage.objects, burst.objects);
  });
  return (
    <section aria-labelledby="charts-usage-title">
      <h1 id="charts-usage-title">Usage per resource</h1>
      <p class={css.note}>What the account&apos;s servers, drives and traffic used at each billing poll, and the part billed as burst.</p>
      <ErrorBox error={error} />
      {data ? (
        <div class={css.grid}>
          {USAGE_GROUPS.map((g) => {
            const cols = data[g.id];
            const fmt = (n: number) => formatAmount(n, g.unit);
            const used = cols[1].filter((v): v is number => v !== null);
            return (
              <Chart
                key={g.id}
                id={`chart-usage-${g.id}`}
                title={g.label}
                columns={cols}
                series={USAGE_SERIES}
                format={fmt}
                summary={used.length ? `now ${fmt(used[used.length - 1])}, peak ${fmt(Math.max(...used))}` : 'no usage recorded'}
              />
            );
          })}
        </div>
      ) : error ? null : (
        <p>Loading…</p>
      )}
    </section>
  );
}

const LEVEL_SERIES: SeriesSpec[] = [{ label: 'Price', stroke: '#7c3aed', points: true }];

export function BurstLevels() {
  const [data, error] = useBillingData(async () => {
    const [pricing, usage] = await Promise.all([
      get<Pricing>('pricing/?limit=0'),
      get<{ balance: { currency: string }; usage: Record<string, { burst: number; subscribed: number; using: number }> }>('currentusage/'),
    ]);
    return { pricing, usage: usage.usage, currency: usage.balance?.currency };
  });
  const resources = useMemo(() => (data ? burstResources(data.pricing).filter((r) => ['cpu', 'mem', 'dssd', 'ssd', 'tx'].includes(r)) : []), [data]);
  return (
    <section aria-labelledby="charts-levels-title">
      <h1 id="charts-levels-title">Burst levels</h1>
      <p class={css.note}>
        The burst price of each resource at every level; the dashed lines mark the level in force and the next one (levels follow the cloud&apos;s load,
        recalculated every 5 minutes).
      </p>
      <ErrorBox error={error} />
      {data ? (
        <div class={css.grid}>
          {resources.map((r) => {
            const l = levelsOf(data.pricing, r, data.currency);
            const u = data.usage[r];
            const markers = [
              ...(l.current === null ? [] : [{ x: l.current, label: `now: ${l.current}`, color: '#dc2626' }]),
              ...(l.next === null || l.next === l.current ? [] : [{ x: l.next, label: `next: ${l.next}`, color: '#d97706' }]),
            ];
            const fmt = (n: number) => `${+n.toPrecision(4)} ${l.currency}`;
            return (
              <Chart
                key={r}
                id={`chart-level-${r}`}
                title={`${r} (${l.unit})`}
                columns={l.columns}
                series={LEVEL_SERIES}
                time={false}
                xLabel="Burst level"
                markers={markers}
                format={fmt}
                summary={`level ${l.current ?? '–'} now, ${l.next ?? '–'} next${u ? `; using ${u.using}, subscribed ${u.subscribed}, burst ${u.burst}` : ''}`}
              />
            );
          })}
        </div>
      ) : error ? null : (
        <p>Loading…</p>
      )}
    </section>
  );
}
