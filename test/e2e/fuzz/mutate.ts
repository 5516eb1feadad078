/** Structural mutations of a JSON body: every field path, set, delete, add, combine. */
import type { Rng } from './random.ts';
import { RawJson, extremeSameType, nastyString, unknownKey, wrongTypeValue, deepNesting, type Json } from './values.ts';

export type FieldPath = (string | number)[];

/** Every key of every object (and the first element of every array), up to `maxDepth` levels. */
export function fieldPaths(v: Json, maxDepth = 3, prefix: FieldPath = []): FieldPath[] {
  if (prefix.length >= maxDepth || v === null || typeof v !== 'object' || v instanceof RawJson) return [];
  const out: FieldPath[] = [];
  const entries: [string | number, Json][] = Array.isArray(v) ? (v.length ? [[0, v[0]]] : []) : Object.entries(v);
  for (const [k, x] of entries) {
    const p = [...prefix, k];
    out.push(p, ...fieldPaths(x, maxDepth, p));
  }
  return out;
}

export function clone(v: Json): Json {
  if (v === null || typeof v !== 'object' || v instanceof RawJson) return v;
  if (Array.isArray(v)) return v.map(clone);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clone(x)]));
}

export function getAt(v: Json, path: FieldPath): Json | undefined {
  let cur: Json | undefined = v;
  for (const k of path) {
    if (cur === null || typeof cur !== 'object' || cur instanceof RawJson) return undefined;
    cur = (cur as Record<string | number, Json>)[k];
  }
  return cur;
}

/** A copy of `v` with `value` at `path` (undefined deletes the key). */
export function setAt(v: Json, path: FieldPath, value: Json | undefined): Json {
  if (path.length === 0) return value === undefined ? null : value;
  const root = clone(v);
  let cur = root as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) {
    const next = cur[k];
    if (next === null || typeof next !== 'object' || next instanceof RawJson) return root;
    cur = next as Record<string | number, Json>;
  }
  const last = path[path.length - 1];
  if (value === undefined) {
    if (Array.isArray(cur)) cur.splice(last as number, 1);
    else delete cur[last];
  } else {
    // defineProperty: a key named __proto__ must become a real key, not the prototype
    Object.defineProperty(cur, last, { value, enumerable: true, writable: true, configurable: true });
  }
  return root;
}

/** One to three random changes; returns the new body and what was done. */
export function randomMutation(rng: Rng, body: Json): { body: Json; note: string } {
  const notes: string[] = [];
  let cur = body;
  const n = rng.chance(0.7) ? 1 : rng.int(2, 3);
  for (let i = 0; i < n; i++) {
    const paths = fieldPaths(cur);
    const op = paths.length === 0 ? 4 : rng.int(0, 9);
    if (op <= 3) {
      const p = rng.pick(paths);
      cur = setAt(cur, p, wrongTypeValue(rng, getAt(cur, p)));
      notes.push(`wrong type at ${p.join('.')}`);
    } else if (op <= 5 && paths.length) {
      const p = rng.pick(paths);
      const old = getAt(cur, p);
      cur = setAt(cur, p, old === undefined ? nastyString(rng) : extremeSameType(rng, old));
      notes.push(`extreme value at ${p.join('.')}`);
    } else if (op === 6 && paths.length) {
      const p = rng.pick(paths);
      cur = setAt(cur, p, undefined);
      notes.push(`missing ${p.join('.')}`);
    } else if (op <= 8) {
      const objects: FieldPath[] = [[], ...paths.filter((p) => isObject(getAt(cur, p)))];
      const p = rng.pick(objects);
      const k = unknownKey(rng);
      cur = setAt(cur, [...p, k], rng.chance(0.5) ? nastyString(rng) : wrongTypeValue(rng, undefined));
      notes.push(`unknown key ${JSON.stringify(k.slice(0, 20))} at ${p.join('.') || 'top'}`);
    } else {
      cur = rng.pick<Json>([[], [body], 'a string', 42, null, true, deepNesting(rng.pick([10, 50_000])), new RawJson('"\\u0000"')]);
      notes.push('whole body replaced');
      break;
    }
  }
  return { body: cur, note: notes.join('; ') };
}

function isObject(v: Json | undefined): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof RawJson);
}
