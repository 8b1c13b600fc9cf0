import { test } from 'node:test';
import assert from 'node:assert/strict';
import { money } from '../../src/ui/parts/money.js';

test("the console's money: the API's decimal string rounded half up to cents on its digits, thousands separated", () => {
  assert.equal(money('10000.00000000000000000000'), '10,000.00');
  assert.equal(money('0.005'), '0.01');
  assert.equal(money('0.00499999999999999999'), '0.00', 'no float: 0.00499… stays below half a cent');
  assert.equal(money('1234567.895'), '1,234,567.90');
  assert.equal(money('-12.345'), '-12.35');
  assert.equal(money('-0.004'), '0.00', 'no sign on what rounds to zero');
  assert.equal(money('99999999999999999.995'), '100,000,000,000,000,000.00', 'beyond a float’s digits');
  assert.equal(money('7'), '7.00');
  assert.equal(money('2.5', 0), '3');
  assert.equal(money(null), '—');
  assert.equal(money('n/a'), 'n/a', 'what is not a number is shown as it is');
});
