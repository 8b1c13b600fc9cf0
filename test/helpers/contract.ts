/**
 * Every answer the test client receives is checked against the OpenAPI document the server itself serves
 * (`/api/2.0/openapi.json`, generated from the declarations), so the contract and the behaviour cannot drift.
 *
 * The rule, per answer:
 * - a path the document does not name, or a method its path item lacks: the answer must be an error
 *   (4xx/5xx) in the API's error format (404 for an unknown path, 405 for a method, or an error the
 *   conventions answer before routing);
 * - OPTIONS: 200 or an error;
 * - a documented operation: the status must be documented; a JSON body must match that status's schema (the
 *   error array of that status for errors; with `fields=` the response's `x-stratus-fields` schema, where
 *   any declared key may be absent); an XML or other body must be of a media type documented for that
 *   status; a documented empty answer (204) must be empty. HEAD is checked as GET without its body.
 *
 * Each schema is compiled once per document (the documents of servers with the same kinds are one text).
 * Answers read over the test client only; tests that speak raw HTTP (edges, robustness) test the wire itself.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

type Json = Record<string, any>;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: unknown;
}

interface Route {
  template: string;
  pattern: RegExp;
  params: number;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options'];
const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class Contract {
  // strict off: the document's OpenAPI keywords (x-stratus-fields, readOnly descriptions) are not validation keywords.
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly routes: Route[];

  constructor(readonly doc: Json) {
    this.ajv.addSchema(doc, 'openapi');
    // Static segments win over parameters (as in the router): fewer parameters first.
    this.routes = Object.keys(doc.paths)
      .map((template) => ({
        template,
        params: (template.match(/\{/g) ?? []).length,
        pattern: new RegExp(
          '^' +
            template
              .replace(/\/$/, '')
              .split(/(\{[^}]+\})/)
              .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
              .join('') +
            '/?$',
        ),
      }))
      .sort((a, b) => a.params - b.params);
  }

  /** The document path a request path falls under, if any. */
  route(path: string): string | undefined {
    return this.routes.find((r) => r.pattern.test(path))?.template;
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.compiled.get(pointer);
    if (!v) this.compiled.set(pointer, (v = this.ajv.compile({ $ref: `openapi#${pointer}` })));
    return v;
  }

  private checkBody(pointer: string, body: unknown, what: string): void {
    const v = this.validator(pointer);
    if (!v(body)) {
      const errors = (v.errors ?? [])
        .slice(0, 5)
        .map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`)
        .join('; ');
      throw new Error(`${what}: body does not match ${pointer}: ${errors}\n${JSON.stringify(body).slice(0, 1500)}`);
    }
  }

  /** An error answer: a documented error status and, as JSON, that status's error array. */
  private checkError(answer: Answer, what: string): void {
    const schema = this.doc.components.schemas[`Error${answer.status}`];
    if (!schema) throw new Error(`${what}: status ${answer.status} is not one of the documented error statuses\n${answer.text.slice(0, 500)}`);
    if (isJson(answer)) this.checkBody(`/components/schemas/Error${answer.status}`, answer.json, what);
  }

  /** Throws when the answer breaks the document (see the module comment). */
  check(method: string, url: URL, answer: Answer): void {
    const what = `${method} ${url.pathname}${url.search} answered ${answer.status}`;
    const template = this.route(url.pathname);
    const m = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase();
    const item = template ? this.doc.paths[template] : undefined;
    if (!item || !METHODS.includes(m) || !item[m]) return this.checkError(answer, `${what} (not in the document)`);
    let response = item[m].responses[String(answer.status)];
    let pointer = `/paths/${escapePointer(template!)}/${m}/responses/${answer.status}`;
    if (!response) throw new Error(`${what}: status not documented for ${m.toUpperCase()} ${template}\n${answer.text.slice(0, 500)}`);
    if (typeof response.$ref === 'string') {
      pointer = response.$ref.slice(1);
      response = this.doc.components.responses[pointer.split('/').pop()!];
    }
    if (method.toUpperCase() === 'HEAD') return;
    const media = String(answer.headers['content-type'] ?? '')
      .split(';')[0]
      .trim();
    const content = response.content as Json | undefined;
    if (!content) {
      if (answer.text !== '') throw new Error(`${what}: documented without a body, got ${media}: ${answer.text.slice(0, 200)}`);
      return;
    }
    if (!(media in content)) throw new Error(`${what}: content type ${media || '(none)'} is not documented (${Object.keys(content).join(', ')})`);
    if (media !== 'application/json' || answer.json === undefined) return;
    const projected = response['x-stratus-fields'] && url.searchParams.getAll('fields').some((f) => f.trim() !== '');
    this.checkBody(projected ? `${pointer}/x-stratus-fields` : `${pointer}/content/application~1json/schema`, answer.json, what);
  }
}

const isJson = (a: Answer) => String(a.headers['content-type'] ?? '').startsWith('application/json') && a.json !== undefined;

/** Compiled contracts by document text: servers of one set of kinds share one. */
const byText = new Map<string, Contract>();
/** The contract of each server (by base URL). */
const byBase = new Map<string, Promise<Contract>>();

export function contractOf(text: string): Contract {
  let c = byText.get(text);
  if (!c) byText.set(text, (c = new Contract(JSON.parse(text) as Json)));
  return c;
}

/** The test server helper hands over the document it read in-process (no extra request on the wire). */
export function knownContract(base: string, text: string): void {
  byBase.set(base, Promise.resolve(contractOf(text)));
}

export function contractFor(base: string, fetchDoc: () => Promise<Answer>): Promise<Contract> {
  let c = byBase.get(base);
  if (!c) {
    c = fetchDoc().then((a) => {
      if (a.status !== 200) throw new Error(`${base} serves no OpenAPI document (status ${a.status})`);
      return contractOf(a.text);
    });
    byBase.set(base, c);
  }
  return c;
}

/** Answers checked in this process; written out for the runner's summary (test/run.ts). */
let checked = 0;
export const countChecked = () => void checked++;
const countsDir = process.env.STRATUS_CONTRACT_COUNTS;
if (countsDir)
  process.on('exit', () => {
    if (checked) appendFileSync(join(countsDir, `${process.env.STRATUS_TEST_DB ?? 'sqlite'}.count`), `${checked}\n`);
  });
