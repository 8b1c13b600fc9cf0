import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { normaliseRule, normaliseRules } from '../../src/resources/fwpolicies/rules.js';
import { fixture, golden } from '../helpers/golden.js';
import { validationFailure } from '../helpers/errors.js';

const RULE_KEYS = ['action', 'comment', 'direction', 'dst_ip', 'dst_port', 'ip_proto', 'src_ip', 'src_port'];

/** A complete normalised rule: the base every expectation below changes a field or two of. */
const full = (over: Record<string, unknown> = {}) => ({
  action: 'accept',
  comment: null,
  direction: 'in',
  dst_ip: null,
  dst_port: null,
  ip_proto: null,
  src_ip: null,
  src_port: null,
  ...over,
});

/** Normalise one rule given as its extra fields on top of a valid accept/in rule. */
const one = (fields: Record<string, unknown>) => normaliseRules([{ action: 'accept', direction: 'in', ...fields }])[0];

const failure = validationFailure;

describe('recorded rules', () => {
  test('the recorded create request normalises to the recorded response (dumps fwpolicy_create_full)', () => {
    const sent = golden('request_fwpolicy_create_full').objects[0].rules;
    const answered = golden('response_fwpolicy_create_full').objects[0].rules;
    assert.equal(sent.length, 5);
    assert.deepEqual(normaliseRules(sent), answered);
  });

  test('the recorded update request normalises to the recorded response (dumps fwpolicy_update)', () => {
    assert.deepEqual(normaliseRules(golden('request_fwpolicy_update').rules), golden('response_fwpolicy_update').rules);
  });

  test('a minimal create has no rules (dumps fwpolicy_create_minimal)', () => {
    assert.equal(golden('request_fwpolicy_create_minimal').objects[0].rules, undefined);
    assert.deepEqual(normaliseRules(undefined), golden('response_fwpolicy_create_minimal').objects[0].rules);
  });

  test('every recorded answer is already normal: sent back, it comes back unchanged', () => {
    const lists = [
      golden('response_fwpolicy_get').rules,
      ...golden('response_fwpolicy_list_detail').objects.map((o: any) => o.rules),
      ...fixture('fwpolicies_detail.json').objects.map((o: any) => o.rules),
      fixture('fwpolicies_create_with_rules.json').objects[0].rules,
      fixture('fwpolicies_create_no_rules.json').objects[0].rules,
    ];
    const total = lists.reduce((n, l) => n + l.length, 0);
    assert.equal(total, 16);
    for (const rules of lists) assert.deepEqual(normaliseRules(rules), rules);
  });

  test('the recorded quirk and the recorded forms one by one', () => {
    assert.equal(one({ dst_ip: '23' }).dst_ip, '23.0.0.0/32');
    assert.equal(one({ src_ip: '!172.66.32.55' }).src_ip, '!172.66.32.55/32');
    assert.equal(one({ src_ip: '172.66.32.0/24' }).src_ip, '172.66.32.0/24');
    assert.equal(one({ ip_proto: 'tcp', dst_port: '22' }).dst_port, '22');
    assert.equal(one({ ip_proto: 'tcp', dst_port: '!1:1024' }).dst_port, '!1:1024');
    assert.equal(one({ src_ip: '127.0.0.1/32', dst_ip: '127.0.0.1' }).dst_ip, '127.0.0.1/32');
  });
});

describe('normalisation', () => {
  test('every rule has exactly the eight keys, unset ones null', () => {
    const rule = one({});
    assert.deepEqual(Object.keys(rule), RULE_KEYS);
    assert.deepEqual(rule, full());
  });

  test('null, absent and [] are no rules; order is kept', () => {
    assert.deepEqual(normaliseRules(null), []);
    assert.deepEqual(normaliseRules(undefined), []);
    assert.deepEqual(normaliseRules([]), []);
    const rules = normaliseRules([
      { action: 'drop', direction: 'out', comment: 'first' },
      { action: 'accept', direction: 'both', comment: 'second' },
      { action: 'drop', direction: 'in', comment: 'third' },
    ]);
    assert.deepEqual(
      rules.map((r) => [r.comment, r.action, r.direction]),
      [
        ['first', 'drop', 'out'],
        ['second', 'accept', 'both'],
        ['third', 'drop', 'in'],
      ],
    );
  });

  test('empty strings count as unset', () => {
    assert.deepEqual(one({ ip_proto: '', src_ip: '', dst_ip: '', src_port: '', dst_port: '', comment: '' }), full());
  });

  test('unknown keys are ignored (clients send whole objects back)', () => {
    assert.deepEqual(one({ uuid: 'x', resource_uri: '/api/2.0/fwpolicies/x/', extra: { a: 1 } }), full());
  });

  test('ports given as numbers come back as strings', () => {
    assert.deepEqual(one({ ip_proto: 'udp', src_port: 53, dst_port: 65535 }), full({ ip_proto: 'udp', src_port: '53', dst_port: '65535' }));
    assert.equal(one({ ip_proto: 'tcp', dst_port: 1 }).dst_port, '1');
  });

  test('port text: single, range, negated, leading zeros and white space dropped', () => {
    const cases: [unknown, string][] = [
      ['80', '80'],
      ['1:65535', '1:65535'],
      ['22:22', '22:22'],
      ['!443', '!443'],
      ['!1:1024', '!1:1024'],
      ['0080', '80'],
      [' 8080 ', '8080'],
      ['!0001:00022', '!1:22'],
    ];
    for (const [given, shown] of cases) assert.equal(one({ ip_proto: 'tcp', dst_port: given }).dst_port, shown, String(given));
  });

  test('a port on a rule without ip_proto is accepted and kept', () => {
    assert.deepEqual(one({ dst_port: '22' }), full({ dst_port: '22' }));
    assert.deepEqual(one({ src_port: '!1:1024' }), full({ src_port: '!1:1024' }));
  });

  test('IPv4 forms: bare, partial, CIDR with host bits, masks, /0', () => {
    const cases: [string, string][] = [
      ['10.1.2.3', '10.1.2.3/32'],
      ['23', '23.0.0.0/32'],
      ['10.1', '10.1.0.0/32'],
      ['192.168.7', '192.168.7.0/32'],
      ['10/8', '10.0.0.0/8'],
      ['172.16/12', '172.16.0.0/12'],
      ['192.168.1.1/24', '192.168.1.1/24'],
      ['10.1.2.3/0', '10.1.2.3/0'],
      ['0.0.0.0/0', '0.0.0.0/0'],
      ['10.0.0.0/255.0.0.0', '10.0.0.0/8'],
      ['10.0.0.0/255.255.255.255', '10.0.0.0/32'],
      ['10.0.0.0/0.0.0.255', '10.0.0.0/24'],
      ['10.0.0.0/024', '10.0.0.0/24'],
      ['!10.0.0.0/8', '!10.0.0.0/8'],
      ['!23', '!23.0.0.0/32'],
      [' 1.2.3.4 ', '1.2.3.4/32'],
    ];
    for (const [given, shown] of cases) assert.equal(one({ src_ip: given }).src_ip, shown, given);
  });

  test('IPv6 forms: host length, RFC 5952 text, mapped IPv4 dotted', () => {
    const cases: [string, string][] = [
      ['::1', '::1/128'],
      ['::', '::/128'],
      ['::/0', '::/0'],
      ['2001:DB8::1', '2001:db8::1/128'],
      ['2001:0db8:0000:0000:0000:0000:0000:0001/64', '2001:db8::1/64'],
      ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1/128'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1/128'],
      ['fe80::/10', 'fe80::/10'],
      ['!2001:db8::/32', '!2001:db8::/32'],
      ['::ffff:10.1.2.3', '::ffff:10.1.2.3/128'],
      ['::ffff:a01:203/104', '::ffff:10.1.2.3/104'],
      ['2001:db8::/ffff:ffff::', '2001:db8::/32'],
    ];
    for (const [given, shown] of cases) assert.equal(one({ dst_ip: given }).dst_ip, shown, given);
  });

  test('a mapped IPv4 network and an IPv4 address make one rule of one version', () => {
    assert.deepEqual(one({ src_ip: '::ffff:10.0.0.0/104', dst_ip: '10.1.2.3' }), full({ src_ip: '::ffff:10.0.0.0/104', dst_ip: '10.1.2.3/32' }));
  });

  test('normalising twice changes nothing', () => {
    const once = normaliseRules([
      { action: 'drop', direction: 'both', ip_proto: 'udp', src_ip: '10', src_port: 53, dst_ip: '!10.0.0.0/255.0.0.0', dst_port: '0022:23', comment: 'c' },
      { action: 'accept', direction: 'out', dst_ip: '2001:0DB8::0/48' },
    ]);
    assert.deepEqual(normaliseRules(once), once);
    assert.deepEqual(once[0], {
      action: 'drop',
      comment: 'c',
      direction: 'both',
      dst_ip: '!10.0.0.0/8',
      dst_port: '22:23',
      ip_proto: 'udp',
      src_ip: '10.0.0.0/32',
      src_port: '53',
    });
    assert.equal(once[1].dst_ip, '2001:db8::/48');
  });

  test('normaliseRule names its rule with the point it is given', () => {
    assert.equal(failure(() => normaliseRule({ direction: 'in' }, 'rules.7')).point, 'rules.7.action');
    assert.deepEqual(normaliseRule({ action: 'drop', direction: 'out' }, 'rules.0'), full({ action: 'drop', direction: 'out' }));
  });
});

describe('violations name the rule and the field', () => {
  const ok = { action: 'accept', direction: 'in' };
  /** [rules sent, error_point expected]; the bad rule sits behind a good one where it says rules.1. */
  const cases: [unknown, string][] = [
    // the list itself
    ['not a list', 'rules'],
    [{ action: 'accept', direction: 'in' }, 'rules'],
    [42, 'rules'],
    [true, 'rules'],
    // a rule that is not an object
    [[ok, 'drop'], 'rules.1'],
    [[ok, null], 'rules.1'],
    [[ok, [ok]], 'rules.1'],
    [[7], 'rules.0'],
    // required choices
    [[{ direction: 'in' }], 'rules.0.action'],
    [[{ action: null, direction: 'in' }], 'rules.0.action'],
    [[{ action: '', direction: 'in' }], 'rules.0.action'],
    [[ok, { action: 'reject', direction: 'in' }], 'rules.1.action'],
    [[{ action: 'ACCEPT', direction: 'in' }], 'rules.0.action'],
    [[{ action: 1, direction: 'in' }], 'rules.0.action'],
    [[{ action: 'drop' }], 'rules.0.direction'],
    [[{ action: 'drop', direction: 'inout' }], 'rules.0.direction'],
    [[ok, ok, { action: 'drop', direction: 'IN' }], 'rules.2.direction'],
    // ip_proto
    [[{ ...ok, ip_proto: 'icmp' }], 'rules.0.ip_proto'],
    [[{ ...ok, ip_proto: 'TCP' }], 'rules.0.ip_proto'],
    [[{ ...ok, ip_proto: 6 }], 'rules.0.ip_proto'],
    // addresses
    [[{ ...ok, src_ip: '256.1.1.1' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4.5' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '01.2.3.4' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: 'example.com' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '!!1.2.3.4' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '!' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/33' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/-1' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/24/1' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/255.0.255.0' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: '1.2.3.4/ffff::' }], 'rules.0.src_ip'],
    [[{ ...ok, src_ip: 16909060 }], 'rules.0.src_ip'],
    [[{ ...ok, dst_ip: '2001:db8::/129' }], 'rules.0.dst_ip'],
    [[{ ...ok, dst_ip: '2001:db8:::1' }], 'rules.0.dst_ip'],
    [[{ ...ok, dst_ip: 'fe80::1%eth0' }], 'rules.0.dst_ip'],
    [[{ ...ok, dst_ip: '12345::' }], 'rules.0.dst_ip'],
    [[{ ...ok, dst_ip: ['1.2.3.4'] }], 'rules.0.dst_ip'],
    [[ok, { ...ok, src_ip: '1.2.3.4', dst_ip: '2001:db8::1' }], 'rules.1.dst_ip'],
    [[{ ...ok, src_ip: '::1', dst_ip: '10.0.0.0/8' }], 'rules.0.dst_ip'],
    // ports
    [[{ ...ok, ip_proto: 'tcp', dst_port: '0' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '65536' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: 0 }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: 65536 }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: -22 }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: 22.5 }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '1024:1' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '1-1024' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '1:' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: ':80' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '1:2:3' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: 'ssh' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '!!22' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '22,80' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: '1:70000' }], 'rules.0.dst_port'],
    [[{ ...ok, ip_proto: 'tcp', dst_port: true }], 'rules.0.dst_port'],
    [[ok, ok, ok, { ...ok, ip_proto: 'udp', src_port: 'x' }], 'rules.3.src_port'],
    [[{ ...ok, src_port: { from: 1 } }], 'rules.0.src_port'],
    // comment
    [[{ ...ok, comment: 5 }], 'rules.0.comment'],
    [[{ ...ok, comment: { text: 'x' } }], 'rules.0.comment'],
  ];

  test(`${cases.length} kinds of bad input`, (t) => {
    for (const [rules, point] of cases) {
      const error = failure(() => normaliseRules(rules));
      assert.equal(error.point, point, `${JSON.stringify(rules)} -> ${error.point} (${error.message})`);
      assert.equal(error.status, 400);
    }
    t.diagnostic(`${cases.length} violations checked`);
  });

  test('the first bad rule is the one named', () => {
    assert.equal(failure(() => normaliseRules([ok, { action: 'x', direction: 'in' }, { action: 'y', direction: 'in' }])).point, 'rules.1.action');
  });
});
