/**
 * Notifications survive `kill -9` and are delivered at least once, never lost.
 *
 * A real `stratus serve` process sends its mail to an SMTP sink on loopback that takes a moment for each
 * message (so kills land mid-delivery). Clients ask for password resets of a few accounts
 * (`reset_password`: each acknowledged request commits one notification for the account's address) while
 * the process is killed with SIGKILL (STRATUS_KILL9_KILLS times, default 3) at random points of the work:
 * each kill once a random number of requests (half to one and a half times STRATUS_NOTIFY_KILL9_REQUESTS,
 * default 30) have been acknowledged since the last, and the load ends after as many more. Counts of work,
 * not durations, so a loaded machine makes the run slower, never weaker. Then the clock is moved past the
 * delivery lease (a delivery claimed by a killed process is retried then) until the queue has drained: every
 * event fanned out, no delivery pending, and the sink holding every message it acknowledged. Only then (no
 * message can arrive later) the sink must hold, per account, at least one message for every acknowledged
 * request and at most one per request made (a request without an answer may or may not have committed); a
 * message received twice must carry the same Message-ID (at-least-once, recognisable duplicates).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';
import { smtpSink } from '../helpers/auth.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client, connectionLost } from '../helpers/client.js';
import { serveProcess, stratus, type Running } from '../helpers/process.js';
import { until } from '../helpers/until.js';
import { Store } from '../../src/store/db.js';
import { EVENT_NOTIFICATIONS } from '../../src/resources/notifications/types.js';

const KILLS = Math.max(0, Number(process.env.STRATUS_KILL9_KILLS ?? 3));
const REQUESTS = Math.max(4, Number(process.env.STRATUS_NOTIFY_KILL9_REQUESTS ?? 30));
/** Fails a load (or a drain) that makes no progress at all: a deadline, not a measurement. */
const DEADLINE_MS = Math.max(10, Number(process.env.STRATUS_KILL9_DEADLINE_S ?? 600)) * 1000;
const ACCOUNTS = 3;
const TOKEN = 'notify-kill9-admin-token-0123456789';

let dir: string;
let db: { url: string; drop: () => Promise<void> };
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-notify-kill9-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** A slow SMTP sink (kills land mid-delivery) and what it got: (recipient, Message-ID) per message. */
async function slowSink() {
  const sink = await smtpSink({ acceptDelayMs: 20 });
  return {
    url: sink.url,
    get accepting() {
      return sink.accepting;
    },
    get got() {
      return sink.mails.flatMap((m) => m.to.map((to) => ({ to, id: /^Message-ID:\s*(<[^>]+>)/im.exec(m.raw)?.[1] ?? '' })));
    },
    close: () => sink.close(),
  };
}

test(`no notification is lost to kill -9 (${engine}, ${KILLS} kills, ~${REQUESTS} requests apart)`, async () => {
  const sink = await slowSink();
  try {
    assert.equal(stratus(['migrate', '--db', db.url]).status, 0);
    const emails = Array.from({ length: ACCOUNTS }, (_, i) => `notify-kill9-${i}-${Date.now()}@example.com`);
    for (const e of emails) assert.equal(stratus(['users', 'add', e, '--password', 'kill9-secret', '--db', db.url]).status, 0);
    const args = ['--db', db.url, '--rate-limits', 'off', '--login-protection', 'off', '--smtp-url', sink.url, '--admin-token', TOKEN, '--log-level', 'error'];

    let current: Running = await serveProcess(args);
    let ready: Promise<void> = Promise.resolve();
    const asked = new Map(emails.map((e) => [e, { acked: 0, unanswered: 0 }]));
    let stop = false;
    const acked = () => [...asked.values()].reduce((a, n) => a + n.acked, 0);
    /** Waits until `n` more requests are acknowledged (a count, not a time). */
    const progress = async (n: number, what: string) => {
      const goal = acked() + n;
      await until(`${what}: ${n} acknowledged requests (${acked()} of ${goal} so far)`, () => acked() >= goal || stop, DEADLINE_MS);
    };
    const segment = () => randomInt(Math.ceil(REQUESTS / 2), Math.ceil((REQUESTS * 3) / 2) + 1);

    async function worker(): Promise<void> {
      while (!stop) {
        await ready;
        const email = emails[randomInt(emails.length)];
        const n = asked.get(email)!;
        const res = await new Client(current.base).post('accounts/action/?do=reset_password', { email }).catch((err: unknown) => {
          // Only a connection the kill cut is "unanswered"; any other error fails the test.
          if (connectionLost(err)) return 'unanswered' as const;
          throw err;
        });
        if (res === 'unanswered') n.unanswered++;
        else {
          // A kill -9 cuts connections, it never answers: any answer but 200 is a failure of its own.
          assert.equal(res.status, 200, `reset_password for ${email}: ${res.text}`);
          n.acked++;
        }
        // Paced: the point is kills during delivery, not a backlog the last process needs minutes for.
        await new Promise((r) => setTimeout(r, 40));
      }
    }

    const load = Promise.all(Array.from({ length: 3 }, () => worker()));
    // A worker that fails stops the load; `await load` reports it.
    load.catch(() => (stop = true));
    for (let k = 0; k < KILLS && !stop; k++) {
      // The workers loop on requests, so deliveries of the last ones are under way when the count is reached.
      await progress(segment(), `the load before kill ${k + 1}`);
      let restarted!: () => void;
      ready = new Promise((r) => (restarted = r));
      current.child.kill('SIGKILL');
      await current.exited;
      current = await serveProcess(args);
      restarted();
    }
    if (!stop) await progress(segment(), 'the load after the last kill');
    stop = true;
    await load;

    // Deliveries a killed process had claimed are retried once their lease ends: the clock moves past it until
    // the queue has drained. Read from the database the process writes (its own record of the work), and the
    // sink: every event fanned out, no delivery pending, every message the sink took kept. Nothing can arrive
    // after that, so the comparison below needs no grace period.
    const admin = (body: unknown) => new Client(current.base).request('POST', '/_stratus/admin/clock', { body, headers: { authorization: `Bearer ${TOKEN}` } });
    const watcher = await Store.open(db.url, { schema: 'check' });
    try {
      await until(
        'the notification queue drained',
        async () => {
          const unfanned = await watcher.db
            .selectFrom('event_outbox as o')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where(({ not, exists, selectFrom }) => not(exists(selectFrom('notification_fanout as d').select('d.seq').whereRef('d.seq', '=', 'o.seq'))))
            .where('o.type', 'in', Object.keys(EVENT_NOTIFICATIONS))
            .executeTakeFirstOrThrow();
          const pending = await watcher.db
            .selectFrom('notification_deliveries')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('state', '=', 'pending')
            .executeTakeFirstOrThrow();
          if (Number(unfanned.n) === 0 && Number(pending.n) === 0 && sink.accepting === 0) return true;
          assert.equal((await admin({ advance_ms: 120_000 })).status, 200);
          await new Promise((r) => setTimeout(r, 250));
          return false;
        },
        DEADLINE_MS,
      );
    } finally {
      await watcher.close();
    }
    const distinct = () => new Set(sink.got.map((g) => `${g.to} ${g.id}`)).size;

    const report: string[] = [];
    let duplicates = 0;
    for (const [email, n] of asked) {
      const mine = sink.got.filter((g) => g.to === email);
      const ids = new Set(mine.map((g) => g.id));
      duplicates += mine.length - ids.size;
      assert.ok(
        [...ids].every((id) => /^<[^>]+@[^>]+>$/.test(id)),
        'every message has a Message-ID',
      );
      if (ids.size < n.acked || ids.size > n.acked + n.unanswered)
        report.push(`${email}: ${n.acked} acknowledged, ${n.unanswered} unanswered requests, ${ids.size} distinct messages`);
    }
    current.child.kill('SIGTERM');
    await current.exited;
    if (report.length) {
      const store = await Store.open(db.url, { schema: 'check' });
      const states = await store.db
        .selectFrom('notification_deliveries')
        .select(['state', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('state')
        .execute();
      const events = await store.db
        .selectFrom('event_outbox')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirst();
      const fanned = await store.db
        .selectFrom('notification_fanout')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirst();
      await store.close();
      report.push(`deliveries ${JSON.stringify(states)}, outbox ${events?.n}, fanned out ${fanned?.n}`);
    }
    const total = [...asked.values()].reduce((a, n) => ({ acked: a.acked + n.acked, unanswered: a.unanswered + n.unanswered }), { acked: 0, unanswered: 0 });
    if (report.length) console.log(report.join('\n'));
    console.log(`notify-kill9 ${engine}: ${total.acked} acknowledged, ${total.unanswered} unanswered, ${distinct()} distinct messages, ${duplicates} repeats`);
    assert.ok(total.acked > 0, 'the load made requests');
    assert.deepEqual(report, []);
  } finally {
    await sink.close();
  }
});
