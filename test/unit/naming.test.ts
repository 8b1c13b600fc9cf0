import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cloneName } from '../../src/resources/drives/naming.js';

const at = new Date('2014-06-05T09:45:56Z');

test('the four strategies on a fresh name (golden clone-naming dumps)', () => {
  assert.equal(cloneName('test_drive_x', 'NONE', at), 'test_drive_x');
  assert.equal(cloneName('test_drive_x', 'COUNTER', at), 'test_drive_x_1');
  assert.equal(cloneName('test_drive_x', 'DATE', at), 'test_drive_x-2014-06-05');
  assert.equal(cloneName('test_drive_x', 'TIMESTAMP', at), 'test_drive_x-2014-06-05 09:45:56');
});

test('COUNTER increments a trailing number and skips names in use', () => {
  assert.equal(cloneName('disk_3', 'COUNTER', at), 'disk_4');
  const used = new Set(['disk_1', 'disk_2']);
  assert.equal(
    cloneName('disk', 'COUNTER', at, (n) => used.has(n)),
    'disk_3',
  );
});

test('DATE and TIMESTAMP update an old stamp and fall back to COUNTER on a current one', () => {
  assert.equal(cloneName('x-2013-01-01', 'DATE', at), 'x-2014-06-05');
  assert.equal(cloneName('x-2014-06-05', 'DATE', at), 'x-2014-06-05_1');
  assert.equal(cloneName('x-2013-01-01 10:00:00', 'TIMESTAMP', at), 'x-2014-06-05 09:45:56');
  assert.equal(cloneName('x-2014-06-05 09:45:56', 'TIMESTAMP', at), 'x-2014-06-05 09:45:56_1');
  assert.equal(
    cloneName('x', 'DATE', at, (n) => n === 'x-2014-06-05'),
    'x-2014-06-05_1',
  );
});
