import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergedPage, ownSpan, theirsSpan } from '../../src/store/resources/anchors.js';

/**
 * A deep page reads only a window of the owner's rows (ownSpan, from the anchors) and merges it with the
 * shared rows (mergedPage): on random interleavings, every page must be the slice of the whole merged list.
 */
function random(seed: number) {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

test('a deep page from a window of own rows is the slice of the whole merged list', () => {
  const rnd = random(31);
  let windows = 0;
  let sent = 0;
  let shared = 0;
  for (let round = 0; round < 400; round++) {
    const step = 1 + Math.floor(rnd() * 6);
    const own: number[] = [];
    const theirs: number[] = [];
    // Runs of own and shared seqs, ascending: shares clustered or spread, before, between or after.
    const n = Math.floor(rnd() * 40);
    for (let seq = 1, made = 0; made < n + 30; seq++, made++) {
      const shareOdds = round % 3 === 0 ? 0.05 : round % 3 === 1 ? 0.5 : seq < 20 ? 0.9 : 0.1;
      (rnd() < shareOdds ? theirs : own).push(seq);
    }
    const all = [...own, ...theirs].sort((a, b) => a - b);
    const anchors = own.filter((_, i) => i % step === 0);
    for (const limit of [1, 2, 3, 5, 20])
      for (let offset = 0; offset <= all.length + 1; offset++) {
        const { start, end } = ownSpan(anchors, step, own.length, theirs, offset, limit);
        assert.ok(start >= 0 && start <= end && end <= own.length, `span [${start}, ${end})`);
        const page = mergedPage(own.slice(start, end), start, theirs, offset, limit);
        assert.deepEqual(page, all.slice(offset, offset + limit), JSON.stringify({ step, own, theirs, offset, limit, start, end }));
        // What PostgreSQL's one statement is sent: only the shared rows that can meet the window.
        const { lo, hi } = theirsSpan(anchors, step, own.length, theirs, start, end, offset, limit);
        assert.ok(0 <= lo && lo <= hi && hi <= theirs.length, `shared span [${lo}, ${hi})`);
        const cut = mergedPage(own.slice(start, end), start, theirs.slice(lo, hi), offset - lo, limit);
        assert.deepEqual(cut, page, JSON.stringify({ step, own, theirs, offset, limit, start, end, lo, hi }));
        sent += hi - lo;
        shared += theirs.length;
        windows += end - start;
      }
  }
  assert.ok(windows > 0);
  assert.ok(sent < shared / 2, `sent ${sent} of ${shared} shared rows`);
});

test('with 1,000 shared rows before every own row but the first, a deep page reads about its own length', () => {
  const step = 1000;
  const own = [1, ...Array.from({ length: 9999 }, (_, i) => 2000 + i)];
  const theirs = Array.from({ length: 1000 }, (_, i) => 2 + i);
  const anchors = own.filter((_, i) => i % step === 0);
  const { start, end } = ownSpan(anchors, step, own.length, theirs, 10_000, 20);
  assert.ok(end - start <= 21, `read ${end - start} own rows`);
  const all = [...own, ...theirs].sort((a, b) => a - b);
  assert.deepEqual(mergedPage(own.slice(start, end), start, theirs, 10_000, 20), all.slice(10_000, 10_020));
});

test('a deep page among 10,000 own rows with 1,000 shared spread through them is sent about one step of them', () => {
  const step = 1000;
  const own: number[] = [];
  const theirs: number[] = [];
  for (let seq = 1; own.length < 10_000 || theirs.length < 1000; seq++) (seq % 11 === 0 && theirs.length < 1000 ? theirs : own).push(seq);
  const anchors = own.filter((_, i) => i % step === 0);
  const all = [...own, ...theirs].sort((a, b) => a - b);
  for (const offset of [1000, 5000, 9000, 10_980]) {
    const { start, end } = ownSpan(anchors, step, own.length, theirs, offset, 20);
    const { lo, hi } = theirsSpan(anchors, step, own.length, theirs, start, end, offset, 20);
    assert.ok(hi - lo <= 2 * (step / 10) + 20, `sent ${hi - lo} shared rows at ${offset}`);
    assert.deepEqual(mergedPage(own.slice(start, end), start, theirs.slice(lo, hi), offset - lo, 20), all.slice(offset, offset + 20));
  }
});
