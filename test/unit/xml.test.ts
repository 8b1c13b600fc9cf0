import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toXml, fromXml, XmlParseError } from '../../src/http/xml.js';

const H = "<?xml version='1.0' encoding='utf-8'?>\n";

test('scalar types', () => {
  assert.equal(
    toXml({ s: 'x', e: '', i: 42, n: -7, f: 1.5, t: true, b: false, z: null, u: undefined }, 'object'),
    H +
      '<object><b type="boolean">False</b><e></e><f type="float">1.5</f><i type="integer">42</i>' +
      '<n type="integer">-7</n><s>x</s><t type="boolean">True</t><u type="null"/><z type="null"/></object>',
  );
  assert.equal(toXml({ big: 1e21, nan: NaN }, 'object'), H + '<object><big type="integer">1000000000000000000000</big><nan type="null"/></object>');
  assert.equal(toXml({ d: new Date(0) }, 'object'), H + '<object><d>1970-01-01T00:00:00.000Z</d></object>');
});

test('keys are sorted by plain string compare', () => {
  assert.equal(
    toXml({ b: 1, B: 2, a: 3, _: 4 }, 'object'),
    H + '<object><B type="integer">2</B><_ type="integer">4</_><a type="integer">3</a><b type="integer">1</b></object>',
  );
});

test('nested hash and list, lists of scalars', () => {
  const v = { h: { y: 'a', x: { z: 1 } }, l: [1, 'two', null, true, 2.5, { k: 'v' }, [3]], e: [], o: {} };
  assert.equal(
    toXml(v, 'object'),
    H +
      '<object><e type="list"></e><h type="hash"><x type="hash"><z type="integer">1</z></x><y>a</y></h>' +
      '<l type="list"><value type="integer">1</value><value>two</value><value type="null"/>' +
      '<value type="boolean">True</value><value type="float">2.5</value>' +
      '<object type="hash"><k>v</k></object><objects type="list"><value type="integer">3</value></objects></l>' +
      '<o type="hash"></o></object>',
  );
  assert.deepEqual(fromXml(toXml(v, 'object')), v);
});

test('examples from the spec, byte-exact', () => {
  assert.equal(
    toXml({ meta: { limit: 1, offset: 0, total_count: 5 }, objects: [{ name: 'a', runtime: null }] }, 'response'),
    '<?xml version=\'1.0\' encoding=\'utf-8\'?>\n<response><meta type="hash"><limit type="integer">1</limit>' +
      '<offset type="integer">0</offset><total_count type="integer">5</total_count></meta><objects type="list">' +
      '<object type="hash"><name>a</name><runtime type="null"/></object></objects></response>',
  );
  assert.equal(
    toXml([{ error_message: 'x', error_point: null, error_type: 'validation' }], 'objects'),
    "<?xml version='1.0' encoding='utf-8'?>\n<objects><object type=\"hash\"><error_message>x</error_message>" +
      '<error_point type="null"/><error_type>validation</error_type></object></objects>',
  );
  assert.equal(toXml(['a', 1], 'objects'), H + '<objects><value>a</value><value type="integer">1</value></objects>');
});

test('escaping of text and attributes', () => {
  const s = `<a href="x">Tom & 'Jerry'</a>\r\n`;
  const xml = toXml({ s, 'k"&<': s }, 'object');
  assert.equal(
    xml,
    H +
      '<object><key name="k&quot;&amp;&lt;">&lt;a href=&quot;x&quot;&gt;Tom &amp; &apos;Jerry&apos;&lt;/a&gt;&#13;\n</key>' +
      '<s>&lt;a href=&quot;x&quot;&gt;Tom &amp; &apos;Jerry&apos;&lt;/a&gt;&#13;\n</s></object>',
  );
  assert.deepEqual(fromXml(xml), { s, 'k"&<': s });
  // Whitespace in attribute values survives attribute-value normalization.
  assert.deepEqual(fromXml(toXml({ 'a\tb\nc\rd': 1 }, 'object')), { 'a\tb\nc\rd': 1 });
});

test('keys that are not XML names round-trip via <key name="…">', () => {
  const v = { '1abc': 1, 'a b': 'x', 'x:y': null, '': true, é: 'u', ok: 'y', key: 'k' };
  const xml = toXml(v, 'object');
  assert.ok(xml.includes('<key name="1abc" type="integer">1</key>'));
  assert.ok(xml.includes('<key name="" type="boolean">True</key>'));
  assert.ok(xml.includes('<ok>y</ok>'));
  assert.deepEqual(fromXml(xml), v);
  assert.deepEqual(fromXml(toXml({ meta: { 'a b': { 'c d': [1] } } }, 'response')), { meta: { 'a b': { 'c d': [1] } } });
});

test('reserved-looking keys round-trip', () => {
  const v = JSON.parse(
    '{"__proto__":{"polluted":1},"constructor":"c","prototype":1,"toString":"t","hasOwnProperty":2,"x":{"object":"s","objects":"t","value":"v"}}',
  );
  assert.deepEqual(fromXml(toXml(v, 'object')), v);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
});

test('characters not allowed in XML are dropped', () => {
  const xml = toXml({ s: 'a\u0000b\u0001c\u000Bd\uFFFEe\uFFFFf\uD800g\uDC00h😀\ti' }, 'object');
  assert.equal(xml, H + '<object><s>abcdefgh😀\ti</s></object>');
  assert.deepEqual(fromXml(toXml({ 'k\u0000': 1 }, 'object')), { k: 1 });
});

test('parse a list request', () => {
  assert.deepEqual(fromXml('<request><objects><object><name>x</name><cpu type="integer">1000</cpu></object></objects></request>'), [{ name: 'x', cpu: 1000 }]);
  assert.deepEqual(
    fromXml(
      `<?xml version="1.0"?>\n<request>\n  <objects>\n    <object><name>a</name></object>\n    <object><name>b</name></object>\n  </objects>\n</request>\n`,
    ),
    [{ name: 'a' }, { name: 'b' }],
  );
});

test('parse a single-object request and plain field maps', () => {
  assert.deepEqual(fromXml('<request><object><name>x</name><mem type="integer">512</mem><meta type="hash"><a>b</a></meta></object></request>'), {
    name: 'x',
    mem: 512,
    meta: { a: 'b' },
  });
  assert.deepEqual(fromXml('<request><name>x</name><cpu type="integer">1</cpu></request>'), { name: 'x', cpu: 1 });
  assert.deepEqual(fromXml('<request/>'), {});
});

test('leaf parsing rules', () => {
  const doc =
    '<request><a type="integer">12x</a><b type="float">2.5e3</b><c type="boolean">true</c>' +
    '<d type="boolean">yes</d><e type="null">ignored</e><f type="string"> sp </f><g/><h type="weird">q</h>' +
    '<i>&amp;&lt;&gt;&quot;&apos;&#65;&#x42;&#x1F600;</i><j><![CDATA[&amp;<raw>]]></j><k type="list"><value>1</value>' +
    '<value type="integer">2</value></k><r>1</r><r>2</r><s>a<!-- c -->b</s></request>';
  assert.deepEqual(fromXml(doc), {
    a: '12x',
    b: 2500,
    c: true,
    d: false,
    e: null,
    f: ' sp ',
    g: '',
    h: null,
    i: '&<>"\'AB😀',
    j: '&amp;<raw>',
    k: ['1', 2],
    r: '2',
    s: 'ab',
  });
});

test('rejects DOCTYPE / ENTITY (billion laughs) and undefined entities', () => {
  const laughs = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<request><name>&lol3;</name></request>`;
  assert.throws(() => fromXml(laughs), XmlParseError);
  assert.throws(() => fromXml('<!ENTITY x "y"><a/>'), XmlParseError);
  assert.throws(() => fromXml('<!doctype a SYSTEM "file:///etc/passwd"><a>&xxe;</a>'), XmlParseError);
  assert.throws(() => fromXml('<a>&xxe;</a>'), XmlParseError);
  assert.throws(() => fromXml('<a>&#0;</a>'), XmlParseError);
  assert.throws(() => fromXml('<a>&#x110000;</a>'), XmlParseError);
});

test('malformed XML throws XmlParseError', () => {
  for (const bad of [
    '',
    '   ',
    'not xml',
    '<a>',
    '<a></b>',
    '<a><b></a></b>',
    '<a/><b/>',
    '<a></a><b/>',
    '<a/>junk',
    'junk<a/>',
    '<a x="1" x="2"/>',
    '<a x=1/>',
    '<a>\u0001</a>',
    '<a>&amp</a>',
    '<1a/>',
    '<a __proto__="x"/>',
  ]) {
    assert.throws(() => fromXml(bad), XmlParseError, JSON.stringify(bad));
  }
  assert.throws(() => fromXml(42 as unknown as string), XmlParseError);
});

// Speed is the bench's business (no timed unit tests); a quadratic parser would show here as a timeout.
test('nesting limit; big inputs parse or fail cleanly', { timeout: 120_000 }, () => {
  const nest = (d: number): string => '<a type="hash">'.repeat(d) + '</a>'.repeat(d);
  assert.deepEqual(fromXml(nest(64)), toDepth(63));
  assert.throws(() => fromXml(nest(65)), XmlParseError);
  assert.throws(() => fromXml(nest(200_000)), XmlParseError);
  assert.throws(() => fromXml('<a>'.repeat(200_000)), XmlParseError);
  const wide = { objects: Array.from({ length: 5_000 }, (_, i) => ({ name: `vm${i}`, cpu: i, meta: { k: 'v' }, tags: ['a', 'b'] })) };
  const xml = toXml(wide, 'response');
  assert.deepEqual(fromXml(xml), wide.objects);
  function toDepth(d: number): unknown {
    return d === 0 ? {} : { a: toDepth(d - 1) };
  }
});

// ---- property / fuzz tests with a seeded PRNG so failures reproduce ----

function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CHARS = ['a', 'Z', '0', ' ', '\t', '\n', '\r', '&', '<', '>', '"', "'", ';', '#', ']]>', '&amp;', 'é', '😀', '\u2028', 'ß'];
const KEYS = [
  'name',
  'cpu',
  'a',
  'b_c',
  'x.y',
  'z-1',
  'object',
  'objects',
  'value',
  'key',
  '1abc',
  'a b',
  'x:y',
  '',
  '__proto__',
  'constructor',
  'toString',
  '&<>',
  'ключ',
  '\t',
];

function randomValue(r: () => number, depth: number, topLevel = false): unknown {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const str = (): string => Array.from({ length: Math.floor(r() * 6) }, () => pick(CHARS)).join('');
  const kind = depth <= 0 ? Math.floor(r() * 5) : Math.floor(r() * 7);
  switch (kind) {
    case 0:
      return str();
    case 1:
      return Math.floor((r() - 0.5) * 2 ** Math.floor(r() * 53));
    case 2:
      return r() < 0.5;
    case 3:
      return null;
    case 4:
      return r() < 0.5 ? (r() - 0.5) * 1e6 + 0.5 : 2 ** -20 * 3;
    case 5:
      return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth - 1));
    default:
      return randomObject(r, depth - 1, topLevel);
  }
}

function randomObject(r: () => number, depth: number, topLevel = false): Record<string, unknown> {
  const obj: Record<string, unknown> = {};
  const n = Math.floor(r() * 5);
  for (let i = 0; i < n; i++) {
    const key = KEYS[Math.floor(r() * KEYS.length)]!;
    // A lone top-level <object>/<objects> child is unwrapped by tastypie's <request> rule.
    if (topLevel && (key === 'object' || key === 'objects')) continue;
    Object.defineProperty(obj, key, { value: randomValue(r, depth), enumerable: true, writable: true, configurable: true });
  }
  return obj;
}

test('round-trip property: fromXml(toXml(v)) deep-equals v', () => {
  const r = rng(12345);
  for (let i = 0; i < 2000; i++) {
    const v = randomObject(r, 4, true);
    const xml = toXml(v, 'response');
    assert.deepEqual(fromXml(xml), v, xml);
    const list = [randomObject(r, 3), randomObject(r, 3)];
    assert.deepEqual(fromXml(toXml(list, 'objects')), list);
    const one = randomObject(r, 3);
    assert.deepEqual(fromXml(toXml(one, 'object')), one);
  }
});

test('fuzz: only XmlParseError, never anything else', () => {
  const r = rng(987);
  const tokens = [
    '<',
    '>',
    '/',
    '</',
    '<a>',
    '</a>',
    '<a/>',
    '<request>',
    '</request>',
    '<objects>',
    '<object>',
    'type="hash"',
    'type="list"',
    'type="integer"',
    ' ',
    '=',
    '"',
    "'",
    '&',
    ';',
    '&amp;',
    '&#',
    'x',
    '<!--',
    '-->',
    '<![CDATA[',
    ']]>',
    '<?',
    '?>',
    '<!DOCTYPE',
    '<key name="',
    '__proto__',
    'constructor',
    '\u0000',
    '\uD800',
    '😀',
    '<value>',
    '1',
    'True',
  ];
  const seeds = [
    toXml({ meta: { a: 1, 'b c': [1, 'x', { y: null }] }, objects: [{ name: 'a' }] }, 'response'),
    '<request><objects><object><name>x</name><cpu type="integer">1000</cpu></object></objects></request>',
  ];
  for (let i = 0; i < 5000; i++) {
    let input: string;
    const mode = i % 3;
    if (mode === 0) {
      input = Array.from({ length: Math.floor(r() * 30) }, () => tokens[Math.floor(r() * tokens.length)]).join('');
    } else {
      const s = seeds[i % seeds.length]!;
      input = mode === 1 ? s.slice(0, Math.floor(r() * s.length)) : mutate(s, r, tokens);
    }
    try {
      fromXml(input);
    } catch (err) {
      assert.ok(err instanceof XmlParseError, `${String(err)} for ${JSON.stringify(input)}`);
    }
  }
});

function mutate(s: string, r: () => number, tokens: string[]): string {
  for (let k = 0; k < 3; k++) {
    const at = Math.floor(r() * s.length);
    const op = Math.floor(r() * 3);
    const tok = tokens[Math.floor(r() * tokens.length)]!;
    s =
      op === 0
        ? s.slice(0, at) + tok + s.slice(at)
        : op === 1
          ? s.slice(0, at) + s.slice(at + 1 + Math.floor(r() * 5))
          : s.slice(0, at) + tok + s.slice(at + tok.length);
  }
  return s;
}
