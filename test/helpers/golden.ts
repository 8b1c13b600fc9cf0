import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

/** The JSON body of a golden dump (../shared/golden/dumps/<name>). */
export function golden(name: string): any {
  const text = readFileSync(new URL(`../../../shared/golden/dumps/${name}`, import.meta.url), 'utf8');
  return JSON.parse(text.slice(text.search(/[[{]/)));
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
