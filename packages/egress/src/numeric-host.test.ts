import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isIpv4InAnotherForm } from './numeric-host.ts';

test('names of numbers only that are not a dotted quad are IPv4 addresses in another form; dotted quads and names are not', () => {
  // 127.0.0.1 as inet_aton reads it: one 32-bit number, hex, octal, fewer parts, leading zeros.
  for (const host of ['2130706433', '0x7f000001', '0x7f.1', '0x7f.0.0.1', '017700000001', '127.1', '127.0.1', '0177.0.0.1', '127.000.000.001', '01.2.3.4', '1.2.3.4.5', '256.0.0.1', '0x']) {
    assert.equal(isIpv4InAnotherForm(host), true, host);
  }
  for (const host of ['127.0.0.1', '0.0.0.0', '255.255.255.255', '123.example.test', '1x.2', 'a1.b2.c3.d4', '0xg.1', 'example.test']) {
    assert.equal(isIpv4InAnotherForm(host), false, host);
  }
});
