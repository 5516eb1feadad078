/**
 * Random bytes read from the kernel (/dev/urandom), not from a generator in envd's memory.
 * Every microvm guest restored from one saved state starts with the same memory, and with it
 * the same state of V8's and OpenSSL's generators, which nothing in Node can reseed; the
 * kernel's pool is reseeded at each restore (system/after-restore.ts). So what envd draws at
 * random differs between sandboxes restored from one template (docs/runtimes.md, "Clock and
 * randomness after every restore").
 */
import { openSync, readSync } from 'node:fs';

/** Opened once and kept: a descriptor of the device survives a save and restore like any other. */
let urandom: number | undefined;

export function kernelRandomBytes(n: number): Buffer {
  urandom ??= openSync('/dev/urandom', 'r');
  const out = Buffer.alloc(n);
  let got = 0;
  while (got < n) got += readSync(urandom, out, got, n - got, null);
  return out;
}
