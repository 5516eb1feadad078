/**
 * Hostile values: for JSON bodies (wrong types, extreme numbers, huge and strange strings,
 * JSON that JSON.stringify cannot write) and for path segments and query values.
 */
import type { Rng } from './random.ts';

/** JSON text written verbatim into a body (1e999, lone surrogates, deep nesting, duplicate keys). */
export class RawJson {
  constructor(readonly text: string) {}
}

export type Json = null | boolean | number | string | RawJson | Json[] | { [k: string]: Json };

/** JSON.stringify, except that RawJson is written as is (and nesting is not limited by the stack). */
export function jsonText(v: Json): string {
  if (v instanceof RawJson) return v.text;
  if (Array.isArray(v)) return `[${v.map(jsonText).join(',')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${jsonText(x)}`).join(',')}}`;
  return JSON.stringify(v);
}

export const KB = 1024;
export const MB = 1024 * 1024;

export const EXTREME_NUMBERS: readonly Json[] = [
  2 ** 53, -(2 ** 53), 2 ** 53 + 2, 1e308, -1e308, -1, 0, 1.5, -0.5, 2 ** 31, 2 ** 32, 2 ** 63, 5e-324,
  new RawJson('1e999'), new RawJson('-1e999'), new RawJson('-0'), new RawJson('1' + '0'.repeat(400)),
];

export const NUMBERISH_STRINGS: readonly string[] = ['NaN', 'Infinity', '-Infinity', '-1', '0', '1e308', '9007199254740993', '0x10', '1_000', ' 1', '', 'null', 'true'];

const CONTROL = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('') + '\u007f';

export const TRAVERSAL: readonly string[] = [
  '../../../../etc/passwd', '/../../etc/shadow', '..', '../', './.', '%2e%2e/%2e%2e/etc/passwd', '..%2f..%2fetc%2fpasswd',
  '..\\..\\windows', '/tmp/../../../root', '/proc/self/environ', '/dev/zero', '//etc//passwd', '/etc/passwd\u0000.png',
];

/** A string value for a JSON body; `big` allows the 1 MB ones (rarely picked). */
export function nastyString(rng: Rng, big = true): string {
  const r = rng.int(0, 15);
  switch (r) {
    case 0: return '';
    case 1: return ' \t\r\n';
    case 2: return 'ünïcødé 日本語 🎉 \u202eevil \ufeff \u200b';
    case 3: return `nul\u0000in${CONTROL}the middle`;
    case 4: return '\ud800 lone surrogate \udfff';
    case 5: return 'x'.repeat(10 * KB);
    case 6: return big && rng.chance(0.3) ? 'y'.repeat(MB) : 'z'.repeat(64 * KB);
    case 7: return rng.pick(TRAVERSAL);
    case 8: return rng.pick(NUMBERISH_STRINGS);
    case 9: return '\'; DROP TABLE t_svc_sandbox; --';
    case 10: return '${jndi:ldap://x}{{7*7}}<script>alert(1)</script>';
    case 11: return 'a\r\nX-Injected: 1\r\n\r\n';
    case 12: return '__proto__';
    case 13: return `%00%2e%2e%2f${rng.alnum(4)}`;
    case 14: return 'é'.repeat(5 * KB);
    default: return rng.alnum(rng.int(1, 40));
  }
}

/** Deeply nested arrays, as raw text (no recursion anywhere on our side). */
export function deepNesting(depth: number): RawJson {
  return new RawJson('['.repeat(depth) + ']'.repeat(depth));
}

/** A value whose JSON type differs from `current`'s. */
export function wrongTypeValue(rng: Rng, current: Json | undefined): Json {
  const kind = typeOfJson(current);
  for (;;) {
    const choice = rng.int(0, 9);
    const v: Json = (() => {
      switch (choice) {
        case 0: return null;
        case 1: return rng.chance(0.5);
        case 2: return rng.pick(EXTREME_NUMBERS);
        case 3: return nastyString(rng);
        case 4: return [];
        case 5: return [1, 'a', null, { k: [true] }];
        case 6: return {};
        case 7: return { a: { b: { c: [nastyString(rng, false)] } }, '': 1 };
        case 8: return rng.chance(0.2) ? deepNesting(20_000) : deepNesting(64);
        default: return new RawJson(rng.pick(['"\\ud800"', '"\\u0000"', '{"a":1,"a":"dup"}', '{"__proto__":{"polluted":true}}']));
      }
    })();
    if (kind === 'undefined' || typeOfJson(v) !== kind) return v;
  }
}

/** A value of the same JSON type as `current` but extreme (boundaries of what the field means). */
export function extremeSameType(rng: Rng, current: Json): Json {
  switch (typeOfJson(current)) {
    case 'number': return rng.pick(EXTREME_NUMBERS);
    case 'string': return nastyString(rng);
    case 'boolean': return !current;
    case 'array': return rng.chance(0.5) ? [] : Array.from({ length: rng.pick([1_000, 20_000]) }, (_, i) => `item-${i}`);
    case 'object': return rng.chance(0.5) ? {} : Object.fromEntries(Array.from({ length: rng.pick([300, 5_000]) }, (_, i) => [`k${i}`, 'v'.repeat(rng.int(0, 100))]));
    default: return wrongTypeValue(rng, current);
  }
}

export function typeOfJson(v: Json | undefined): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (v instanceof RawJson) return 'raw';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/** Keys nobody expects. */
export function unknownKey(rng: Rng): string {
  return rng.pick(['__proto__', 'constructor', 'prototype', 'unknownField', '', ' ', 'k'.repeat(10 * KB), 'ключ', 'a.b', 'a[0]', '$where', 'toString']);
}

// ---------------------------------------------------------------- path segments and query values

/**
 * Path segments as they go on the wire (already encoded; node's http client refuses raw
 * characters outside 0x21-0xff): empty, huge, traversal raw and encoded, encoded slashes, NUL,
 * bad percent-encoding, numbers and JS-object names.
 */
export function nastySegment(rng: Rng): string {
  return rng.pick([
    '', 'a'.repeat(10 * KB), 'b'.repeat(20 * KB), '..', '.', '../../../../etc/passwd', '%2e%2e', '%2e%2e%2f%2e%2e%2fhealth',
    '..%2f..%2f..%2fetc%2fpasswd', 'a%2fb', '%2f', '%00', 'x%00y', encodeURIComponent('日本🎉'), '%ff%fe', '%', '%zz', '%c0%ae%c0%ae',
    'c'.repeat(65), encodeURIComponent('\'; DROP TABLE t_svc_sandbox; --'), '-1', '0', '9007199254740993', '1e308', 'NaN', 'null',
    'undefined', '__proto__', 'constructor', '%20', '%0d%0aX-Injected:%201', encodeURIComponent(CONTROL), '~', '*', ';a=b', '@',
  ]);
}

/** A query value, encoded. */
export function nastyQueryValue(rng: Rng): string {
  return rng.chance(0.6) ? nastySegment(rng) : percentEncode(nastyString(rng, false).slice(0, 10 * KB));
}

/** encodeURIComponent, except that it never throws (a lone surrogate goes out as U+FFFD's bytes). */
export function percentEncode(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
