import assert from 'node:assert/strict';
import { ApiError } from '../../src/core/errors.js';

/** An answer in the API's error format: its status, `error_type` and `error_point` (never the message text). */
export function expectError(res: { status: number; json: any; text: string }, status: number, type: string, point: string | null): void {
  assert.equal(res.status, status, res.text);
  assert.equal(res.json[0].error_type, type, res.text);
  assert.equal(res.json[0].error_point, point, res.text);
}

/** The error a call throws, which must be a validation error. */
export function validationFailure(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ApiError, `expected an ApiError, got ${String(e)}`);
    assert.equal(e.type, 'validation');
    return e;
  }
  assert.fail('expected a validation error, nothing was thrown');
}
