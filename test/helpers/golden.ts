import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The recorded material tests compare against, kept in the repository (test/data/README.md): the only
 * place that knows where it lives.
 */
/** Raw HTTP exchanges recorded against the real service (`request_<name>` / `response_<name>`). */
export const GOLDEN_DIR = fileURLToPath(new URL('../data/golden/dumps/', import.meta.url));
/** Apache libcloud's CloudSigma 2.0 test fixtures (recorded bodies, including errors). */
export const FIXTURES_DIR = fileURLToPath(new URL('../data/fixtures/libcloud-cloudsigma_2_0/', import.meta.url));

/** The raw text of a golden dump (an HTTP message), e.g. `goldenText('response_tags_list')`. */
export function goldenText(name: string): string {
  return readFileSync(join(GOLDEN_DIR, name), 'utf8');
}

/** The JSON body of a golden dump (test/data/golden/dumps/<name>). */
export function golden(name: string): any {
  const text = goldenText(name);
  return JSON.parse(text.slice(text.search(/[[{]/)));
}

/** A libcloud fixture, parsed (test/data/fixtures/libcloud-cloudsigma_2_0/<name>, e.g. `start_success.json`). */
export function fixture(name: string): any {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, name), 'utf8'));
}

/**
 * The same keys, recursively, and the same JSON types, as a golden object (values may differ; user `meta`
 * dicts inside objects are free-form).
 */
export function sameShape(actual: unknown, expected: unknown, path = '$'): void {
  if (expected === null || typeof expected !== 'object') {
    assert.equal(actual === null ? 'null' : typeof actual, expected === null ? 'null' : typeof expected, `${path} type`);
    return;
  }
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${path} is a list`);
    if (expected.length && (actual as unknown[]).length) sameShape((actual as unknown[])[0], expected[0], `${path}[0]`);
    return;
  }
  assert.ok(actual && typeof actual === 'object' && !Array.isArray(actual), `${path} is an object`);
  // A resource's `meta` is the user's free-form data: its keys are not part of the shape.
  if (path !== '$' && path.endsWith('.meta') && path !== '$.meta') return;
  assert.deepEqual(Object.keys(actual as object).sort(), Object.keys(expected).sort(), `${path} keys`);
  for (const k of Object.keys(expected)) sameShape((actual as any)[k], (expected as any)[k], `${path}.${k}`);
}
