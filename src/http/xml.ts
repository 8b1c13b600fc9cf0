/**
 * XML (de)serialization compatible with django-tastypie's serializer, which is
 * what the CloudSigma API 2.0 speaks when asked for `application/xml`.
 *
 * Writer: hand-rolled string building, no DOM (responses can be large).
 * Reader: fast-xml-parser for tokenizing, with entity processing disabled;
 * the only entities ever decoded are the five predefined ones and numeric
 * character references, which we decode ourselves (no DTDs, no expansion).
 * The library is loaded with the first XML request body (core/lazy.ts): most clients only speak JSON.
 */
import type * as Fxp from 'fast-xml-parser';
import { lazyPackage } from '../core/lazy.js';

export type XmlRoot = 'response' | 'object' | 'objects';

const HEADER = "<?xml version='1.0' encoding='utf-8'?>\n";

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

// Conservative ASCII subset of XML `Name`: no colons (namespaces), no non-ASCII.
const VALID_NAME = /^[A-Za-z_][A-Za-z0-9._-]*$/;
// Cheap pre-check so the common case (plain text) skips both replaces.
// eslint-disable-next-line no-control-regex -- control characters are exactly what XML escaping looks for
const NEEDS_ESCAPE = /[&<>"'\u0000-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/;
// Characters XML 1.0 cannot represent at all, even as references: dropped.
const INVALID_CHARS =
  // eslint-disable-next-line no-control-regex -- the characters XML 1.0 cannot represent
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
// CR is written as a reference because parsers normalize a literal CR to LF;
// in attributes TAB/LF are also referenced because parsers normalize them to spaces.
const TEXT_SPECIAL = /[&<>"'\r]/g;
const ATTR_SPECIAL = /[&<>"'\r\n\t]/g;
const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
  '\r': '&#13;',
  '\n': '&#10;',
  '\t': '&#9;',
};
const escapeChar = (c: string): string => ESCAPES[c]!;

function escapeText(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
  return s.replace(INVALID_CHARS, '').replace(TEXT_SPECIAL, escapeChar);
}

function escapeAttr(s: string): string {
  if (!NEEDS_ESCAPE.test(s)) return s;
  return s.replace(INVALID_CHARS, '').replace(ATTR_SPECIAL, escapeChar);
}

/** Precomputed open/close tags for one element name: most output is a handful of field names. */
interface Tags {
  str: string;
  int: string;
  float: string;
  bool: string;
  nil: string;
  hash: string;
  list: string;
  close: string;
}

function makeTags(open: string, close: string, forceStringType: boolean): Tags {
  return {
    // The reader treats untyped <object>/<objects> as containers; an explicit
    // type="string" keeps a string under those names a string.
    str: open + (forceStringType ? ' type="string">' : '>'),
    int: open + ' type="integer">',
    float: open + ' type="float">',
    bool: open + ' type="boolean">',
    nil: open + ' type="null"/>',
    hash: open + ' type="hash">',
    list: open + ' type="list">',
    close,
  };
}

const tagCache = new Map<string, Tags>();

function tagsFor(key: string): Tags {
  let tags = tagCache.get(key);
  if (tags === undefined) {
    tags = VALID_NAME.test(key)
      ? makeTags('<' + key, '</' + key + '>', key === 'object' || key === 'objects')
      : // Keys that are not valid XML names (user `meta` keys such as "1abc",
        // "a b", "x:y", "") are written as <key name="original">…</key> so the
        // document stays well-formed; fromXml maps them back.
        makeTags('<key name="' + escapeAttr(key) + '"', '</key>', false);
    if (tagCache.size >= 4096) tagCache.clear(); // bound memory: user meta keys are unbounded
    tagCache.set(key, tags);
  }
  return tags;
}

/** Like JSON.stringify: honour toJSON() (e.g. Date) before serializing. */
function unwrap(v: unknown): unknown {
  if (typeof v === 'object' && v !== null && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    return (v as { toJSON(): unknown }).toJSON();
  }
  return v;
}

/** Append one element holding `value` (already unwrapped). Pieces go to `out`, joined once at the end. */
function writeElement(out: string[], t: Tags, value: unknown): void {
  switch (typeof value) {
    case 'string':
      out.push(t.str, escapeText(value), t.close);
      return;
    case 'number':
      if (!Number.isFinite(value)) break; // like JSON: NaN/Infinity become null
      if (Number.isInteger(value)) {
        // Avoid exponent notation (1e+21) for huge integers: it would not parse back as an integer.
        out.push(t.int, Math.abs(value) < 1e21 ? String(value) : BigInt(value).toString(), t.close);
      } else {
        out.push(t.float, String(value), t.close);
      }
      return;
    case 'bigint':
      out.push(t.int, value.toString(), t.close);
      return;
    case 'boolean':
      out.push(t.bool, value ? 'True' : 'False', t.close);
      return;
    case 'object':
      if (value === null) break;
      out.push(Array.isArray(value) ? t.list : t.hash);
      writeChildren(out, value);
      out.push(t.close);
      return;
  }
  // null, undefined, and anything not JSON-like (functions, symbols).
  out.push(t.nil);
}

/** Children of a container: list items, or the keys of an object in sorted order. */
function writeChildren(out: string[], value: object): void {
  if (Array.isArray(value)) {
    for (const item of value) {
      const v = unwrap(item);
      const tag = typeof v !== 'object' || v === null ? 'value' : Array.isArray(v) ? 'objects' : 'object';
      writeElement(out, tagsFor(tag), v);
    }
    return;
  }
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj).sort()) writeElement(out, tagsFor(key), unwrap(obj[key]));
}

/** Serialize a JSON-like value (objects, arrays, strings, numbers, booleans, null) to tastypie-style XML. */
export function toXml(value: unknown, root: XmlRoot): string {
  const out: string[] = [HEADER];
  const v = unwrap(value);
  if (typeof v === 'object' && v !== null) {
    // An object/array root carries no type attribute, like tastypie's <response>/<objects>.
    out.push('<' + root + '>');
    writeChildren(out, v);
    out.push('</' + root + '>');
  } else {
    writeElement(out, tagsFor(root), v);
  }
  return out.join('');
}

// ---------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------

export class XmlParseError extends Error {
  override readonly name = 'XmlParseError';
}

const MAX_DEPTH = 64;
const TEXT = '#text';
const CDATA = '#cdata';
const ATTRS = ':@';
// Element names are prefixed with '<' (never part of an XML name) so they can
// never collide with '#text'/':@' or trip fast-xml-parser's ban on tag names
// like "__proto__"/"constructor". Idempotent: the library may call it twice.
const tagPrefix = (name: string): string => (name.startsWith('<') ? name : '<' + name);

/** The library and one parser for the process, made on first use and reused (the parser keeps no state). */
let fxp: { parser: Fxp.XMLParser; validator: typeof Fxp.XMLValidator } | undefined;
const loadFxp = lazyPackage<typeof Fxp>('fast-xml-parser');

function xmlLibrary(): NonNullable<typeof fxp> {
  if (fxp) return fxp;
  const { XMLParser, XMLValidator } = loadFxp();
  const parser = new XMLParser({
    preserveOrder: true, // keeps repeated children as separate nodes, in order
    ignoreAttributes: false,
    attributeNamePrefix: '',
    processEntities: false, // never expand entities; see decodeEntities()
    htmlEntities: false,
    trimValues: false, // string values keep their whitespace
    parseTagValue: false,
    parseAttributeValue: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    cdataPropName: CDATA, // CDATA content is literal: must not be entity-decoded
    transformTagName: tagPrefix,
    maxNestedTags: MAX_DEPTH - 1, // the library counts its own document node too
  });
  return (fxp = { parser, validator: XMLValidator });
}

// XML 1.0 Char production, negated; surrogates must come in pairs.
const ILLEGAL_INPUT =
  // eslint-disable-next-line no-control-regex -- the characters XML 1.0 forbids in input
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// Checked on the raw text, before any parsing: conservative (also hits CDATA), but
// guarantees no DTD, internal or external entity ever reaches the parser.
const DTD = /<!(?:DOCTYPE|ENTITY)/i;
const ENTITY_REF = /&([^&;]{0,12});|&/g;
const PREDEFINED = new Map([
  ['amp', '&'],
  ['lt', '<'],
  ['gt', '>'],
  ['quot', '"'],
  ['apos', "'"],
]);

function decodeRef(ref: string, body: string | undefined): string {
  const named = body === undefined ? undefined : PREDEFINED.get(body);
  if (named !== undefined) return named;
  let cp = NaN;
  if (body !== undefined && /^#x[0-9a-fA-F]{1,6}$/.test(body)) cp = parseInt(body.slice(2), 16);
  else if (body !== undefined && /^#[0-9]{1,7}$/.test(body)) cp = parseInt(body.slice(1), 10);
  const legal = cp === 0x9 || cp === 0xa || cp === 0xd || (cp >= 0x20 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
  if (!legal) throw new XmlParseError(`Invalid or undefined entity reference ${JSON.stringify(ref)}`);
  return String.fromCodePoint(cp);
}

function decodeEntities(s: string): string {
  return s.includes('&') ? s.replace(ENTITY_REF, decodeRef) : s;
}

/** fast-xml-parser's preserveOrder node: `{ '<tag': children, ':@'?: attrs }` or `{ '#text': s }`. */
type XNode = Record<string, unknown>;

function tagOf(node: XNode): string | undefined {
  for (const k in node) if (k.charCodeAt(0) === 60 /* '<' */) return k.slice(1);
  return undefined;
}

function childrenOf(node: XNode, tag: string): XNode[] {
  return node['<' + tag] as XNode[];
}

function attrOf(node: XNode, name: string): string | undefined {
  const attrs = node[ATTRS] as Record<string, unknown> | undefined;
  const v = attrs?.[name];
  return typeof v === 'string' ? decodeEntities(v) : undefined;
}

/** Concatenated character data of an element (text nodes decoded, CDATA verbatim). */
function textOf(children: XNode[]): string {
  let s = '';
  for (const c of children) {
    const t = c[TEXT];
    if (typeof t === 'string') s += decodeEntities(t);
    const cdata = c[CDATA];
    if (Array.isArray(cdata)) for (const d of cdata as XNode[]) if (typeof d[TEXT] === 'string') s += d[TEXT];
  }
  return s;
}

/** Element children of a container; its stray text is still checked for bad entity references. */
function elementsOf(children: XNode[]): XNode[] {
  const out: XNode[] = [];
  for (const c of children) {
    if (tagOf(c) !== undefined) out.push(c);
    else if (typeof c[TEXT] === 'string') decodeEntities(c[TEXT]);
  }
  return out;
}

/** Own-property assignment that is safe for keys like "__proto__". */
function setKey(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

function toHash(children: XNode[], depth: number): Record<string, unknown> {
  const obj: Record<string, unknown> = {};
  for (const el of elementsOf(children)) {
    const tag = tagOf(el)!;
    // <key name="…"> is the writer's encoding of keys that are not XML names.
    const key = tag === 'key' ? (attrOf(el, 'name') ?? tag) : tag;
    setKey(obj, key, convert(el, depth + 1)); // repeated tags: last wins
  }
  return obj;
}

function toList(children: XNode[], depth: number): unknown[] {
  return elementsOf(children).map((el) => convert(el, depth + 1));
}

const INTEGER = /^\s*[+-]?\d+\s*$/;
const FLOAT = /^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$/;

function convert(node: XNode, depth: number): unknown {
  if (depth > MAX_DEPTH) throw new XmlParseError(`XML nested deeper than ${MAX_DEPTH} levels`);
  const tag = tagOf(node)!;
  const children = childrenOf(node, tag);
  const type = attrOf(node, 'type');
  // Deviation from tastypie: an explicit type wins over the <object>/<objects>
  // tag name, so <object type="string">x</object> (see writer) stays a string.
  if (type === 'hash' || (type === undefined && tag === 'object')) return toHash(children, depth);
  if (type === 'list' || (type === undefined && tag === 'objects')) return toList(children, depth);
  switch (type) {
    case undefined:
    case 'string':
      return textOf(children);
    case 'integer': {
      const text = textOf(children);
      return INTEGER.test(text) ? Number(text) : text;
    }
    case 'float': {
      const text = textOf(children);
      return FLOAT.test(text) ? Number(text) : text;
    }
    case 'boolean': {
      const text = textOf(children).trim();
      return text === 'True' || text === 'true';
    }
    default: // 'null' and unknown types
      return null;
  }
}

function parseDocument(text: string): unknown {
  if (typeof text !== 'string') throw new XmlParseError('XML body must be a string');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // byte order mark
  if (DTD.test(text)) throw new XmlParseError('DOCTYPE and ENTITY declarations are not allowed');
  if (ILLEGAL_INPUT.test(text)) throw new XmlParseError('XML contains characters not allowed in XML 1.0');
  const { parser, validator } = xmlLibrary();
  const valid = validator.validate(text);
  if (valid !== true) {
    throw new XmlParseError(`${valid.err.msg} (line ${valid.err.line}, column ${valid.err.col})`);
  }
  // The validator misses trailing text after a self-closing root element.
  if (!text.trimEnd().endsWith('>')) throw new XmlParseError('Extra text at the end');
  const roots = elementsOf(parser.parse(text) as XNode[]);
  if (roots.length !== 1) throw new XmlParseError('XML document must have exactly one root element');
  const root = roots[0]!;
  const tag = tagOf(root)!;
  // A typed root, or <object>/<objects>, is an ordinary element (what toXml writes).
  if (attrOf(root, 'type') !== undefined || tag === 'object' || tag === 'objects') return convert(root, 1);
  // Otherwise tastypie's <request> rule: unwrap a lone <objects>/<object>, else map children by tag.
  const children = childrenOf(root, tag);
  const elements = elementsOf(children);
  const only = elements.length === 1 ? elements[0]! : undefined;
  if (only !== undefined && (tagOf(only) === 'objects' || tagOf(only) === 'object')) return convert(only, 2);
  return toHash(children, 1);
}

/** Parse a tastypie-style XML request body into a JSON-like value. Throws XmlParseError on anything malformed or unsafe. */
export function fromXml(text: string): unknown {
  try {
    return parseDocument(text);
  } catch (err) {
    if (err instanceof XmlParseError) throw err;
    // fast-xml-parser's own errors (nesting limit, reserved names, …) and stack overflows.
    throw new XmlParseError(err instanceof Error ? err.message : 'Malformed XML');
  }
}
