import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_RULES, formatRules, mergeRules, parseRule, parseRuleJson, parseRuleList, RuleError, RuleSet, type Rule } from '../../src/core/rate-rules.js';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('rate-limit rule text', () => {
  test('the default table is the spec table', () => {
    assert.equal(formatRules(DEFAULT_RULES), 'POST=100/min,POST:/servers/=500/day,PUT=100/min,GET=100/min,DELETE=1000/min');
  });

  test('METHOD[:PATH]=COUNT/PERIOD, with aliases, case-insensitive methods and periods, spaces tolerated', () => {
    assert.deepEqual(parseRule('GET=100/min'), { method: 'GET', path: null, count: 100, per: 'min' });
    assert.deepEqual(parseRule(' post : /servers/ = 500 / Day '), { method: 'POST', path: '/servers/', count: 500, per: 'day' });
    assert.deepEqual(parseRule('*=5/s'), { method: '*', path: null, count: 5, per: 'sec' });
    for (const [alias, per] of [
      ['s', 'sec'],
      ['second', 'sec'],
      ['m', 'min'],
      ['minute', 'min'],
      ['h', 'hour'],
      ['hour', 'hour'],
      ['d', 'day'],
    ])
      assert.equal((parseRule(`PUT=1/${alias}`) as Rule).per, per);
    // The full URL path is accepted and stored relative to /api/2.0.
    assert.equal((parseRule('POST:/api/2.0/servers/=1/day') as Rule).path, '/servers/');
  });

  test('a list round-trips through its canonical text', () => {
    const text = 'GET=1000/min,POST=200/min,POST:/servers/=5000/day,PUT=off';
    const rules = parseRuleList(text, true);
    assert.equal(formatRules(rules), text);
    assert.deepEqual(parseRuleList(formatRules(rules), true), rules);
  });

  test('bad rules are refused with a message that says what is wrong', () => {
    for (const [text, pattern] of [
      ['GET100/min', /no "="/],
      ['FETCH=1/min', /method "FETCH" is not one of GET, POST, PUT, DELETE/],
      ['GET=1000', /no "\/PERIOD"/],
      ['GET=abc/min', /count "abc" is not a whole number/],
      ['GET=1.5/min', /count "1.5" is not a whole number/],
      ['GET=-1/min', /count "-1" is not a whole number/],
      ['GET=0/min', /count must be between 1 and 1000000000/],
      ['GET=1000000001/min', /count must be between 1/],
      ['GET=1/week', /period "week" is not one of sec, min, hour, day/],
      ['POST:servers/=1/day', /path "servers\/" must start with "\/"/],
      ['POST:/ser vers/=1/day', /must start with "\/" and contain only/],
      ['GET=off', /"off" only removes an inherited rule/],
    ] as const) {
      assert.throws(
        () => parseRuleList(text),
        (e: Error) => e instanceof RuleError && pattern.test(e.message),
        text,
      );
    }
    assert.throws(() => parseRuleList(''), /no rules given/);
    assert.throws(() => parseRuleList(' , '), /no rules given/);
    assert.throws(() => parseRuleList('GET=1/min,get=2/hour'), /rule GET is given twice/);
    assert.throws(() => parseRuleList(Array.from({ length: 65 }, (_, i) => `GET:/p${i}/=1/min`).join(',')), /at most 64 rules/);
  });

  test('a JSON rule file: strings or objects, as an array or under "rules", validated item by item', () => {
    const want = [
      { method: 'GET', path: null, count: 3, per: 'min' },
      { method: 'POST', path: '/servers/', count: 2, per: 'hour' },
    ];
    assert.deepEqual(parseRuleJson(['GET=3/min', { method: 'post', path: '/servers/', count: 2, per: 'hour' }]), want);
    assert.deepEqual(parseRuleJson({ rules: ['GET=3/min', 'POST:/servers/=2/h'] }), want);
    assert.deepEqual(parseRuleJson([]), []);
    for (const [value, pattern] of [
      [{ GET: '3/min' }, /must hold a JSON array of rules/],
      ['GET=3/min', /must hold a JSON array/],
      [[42], /rule 1: must be a string like/],
      [['GET=3/min', 'GET=4/min'], /rule GET is given twice/],
      [[{ method: 'GET', count: 3, per: 'min', burst: 5 }], /rule 1: unknown key\(s\) burst/],
      [[{ method: 'GET', count: 3 }], /rule 1: "per" must be one of/],
      [[{ method: 'GET', count: 2.5, per: 'min' }], /rule 1: count "2.5" is not a whole number/],
      [['GET=3/min', { method: 'GET', path: 'x', count: 1, per: 'min' }], /rule 2: path "x" must start with/],
      [['PUT=off'], /rule 1 \("PUT=off"\): "off" only removes/],
    ] as const) {
      assert.throws(
        () => parseRuleJson(value),
        (e: Error) => e instanceof RuleError && pattern.test(e.message),
        JSON.stringify(value),
      );
    }
  });

  test('an override replaces rules of the same METHOD[:PATH], removes those set to off, adds new ones', () => {
    const merged = mergeRules(DEFAULT_RULES, parseRuleList('GET=1000/min,PUT=off,POST:/servers/=5000/day,DELETE:/tags/=5/min', true));
    assert.equal(formatRules(merged), 'POST=100/min,POST:/servers/=5000/day,GET=1000/min,DELETE=1000/min,DELETE:/tags/=5/min');
    assert.deepEqual(mergeRules(DEFAULT_RULES, []), [...DEFAULT_RULES]);
  });
});

describe('which rules a request counts against', () => {
  const set = new RuleSet(DEFAULT_RULES);
  const ids = (method: string, path: string) => formatRules(set.match(method, path));

  test('POST under /servers/ counts against both POST rules; elsewhere only the general one', () => {
    assert.equal(ids('POST', '/servers/'), 'POST=100/min,POST:/servers/=500/day');
    assert.equal(ids('POST', '/servers/0c1b/action/?do=start'), 'POST=100/min,POST:/servers/=500/day');
    assert.equal(ids('POST', '/servers'), 'POST=100/min,POST:/servers/=500/day');
    assert.equal(ids('POST', '/servers?x=1'), 'POST=100/min,POST:/servers/=500/day');
    assert.equal(ids('POST', '/tags/'), 'POST=100/min');
    assert.equal(ids('POST', '/serversx/'), 'POST=100/min');
    assert.equal(ids('POST', '/drives/servers/'), 'POST=100/min');
  });

  test('HEAD counts as GET; OPTIONS and unknown methods are never limited', () => {
    assert.equal(ids('GET', '/tags/'), 'GET=100/min');
    assert.equal(ids('HEAD', '/tags/'), 'GET=100/min');
    assert.equal(ids('PUT', '/profile/'), 'PUT=100/min');
    assert.equal(ids('DELETE', '/tags/x/'), 'DELETE=1000/min');
    assert.equal(ids('OPTIONS', '/tags/'), '');
    assert.equal(ids('PATCH', '/tags/'), '');
  });

  test('"*" matches every limited method', () => {
    const star = new RuleSet(parseRuleList('*=10/min,GET:/tags/=2/sec') as Rule[]);
    assert.equal(formatRules(star.match('GET', '/tags/')), '*=10/min,GET:/tags/=2/sec');
    assert.equal(formatRules(star.match('DELETE', '/x/')), '*=10/min');
    assert.equal(formatRules(star.match('OPTIONS', '/x/')), '');
  });
});

describe('the rate-limits setting', () => {
  const load = (value: string) => loadConfig({ 'rate-limits': value }, {}).rateLimits;

  test('default, off, inline rules, a JSON file; the environment variable too', () => {
    assert.deepEqual(loadConfig({}, {}).rateLimits, DEFAULT_RULES);
    assert.deepEqual(load('default'), DEFAULT_RULES);
    assert.equal(load('off'), null);
    assert.equal(loadConfig({}, { STRATUS_RATE_LIMITS: 'off' }).rateLimits, null);
    assert.equal(formatRules(load('GET=5/min, POST:/servers/=1/day')!), 'GET=5/min,POST:/servers/=1/day');
    const dir = mkdtempSync(join(tmpdir(), 'stratus-rules-'));
    try {
      const file = join(dir, 'rules.json');
      writeFileSync(file, JSON.stringify({ rules: ['GET=7/hour'] }));
      assert.equal(formatRules(load(file)!), 'GET=7/hour');
      writeFileSync(file, '[]');
      assert.deepEqual(load(file), []);
      writeFileSync(file, '["GET=7/fortnight"]');
      assert.throws(
        () => load(file),
        (e: Error) => e instanceof ConfigError && /rate-limits file .*rules\.json: rule 1 .*period "fortnight"/.test(e.message),
      );
      writeFileSync(file, '{not json');
      assert.throws(
        () => load(file),
        (e: Error) => e instanceof ConfigError && /rate-limits: cannot read rule file/.test(e.message),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    assert.throws(
      () => load('/nonexistent/rules.json'),
      (e: Error) => e instanceof ConfigError && /cannot read rule file/.test(e.message),
    );
    assert.throws(
      () => load('GET=many/min'),
      (e: Error) => e instanceof ConfigError && /^rate-limits: rule "GET=many\/min": count/.test(e.message),
    );
  });
});
