import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { capConsoleFile, CONSOLE_MAX_BYTES, consoleTailOf } from './console-file.ts';

test('a console file past its cap is cut to a line saying so, and its writer (append mode) goes on at the new end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-console-'));
  const path = join(dir, 'console.log');
  try {
    assert.equal(await capConsoleFile(path), false, 'none yet: nothing to cut');
    const writer = openSync(path, 'a');
    writeSync(writer, 'x'.repeat(2048));
    assert.equal(await capConsoleFile(path, 4096), false, 'under the cap: kept');
    writeSync(writer, 'y'.repeat(4096));
    assert.equal(await capConsoleFile(path, 4096), true);
    writeSync(writer, 'after the cut\n');
    closeSync(writer);
    const text = readFileSync(path, 'utf8');
    assert.ok(statSync(path).size < 1024, `${statSync(path).size} bytes left`);
    assert.match(text, /the console log passed 0 MiB and was cut/);
    assert.match(text, /after the cut\n$/);
    assert.equal(CONSOLE_MAX_BYTES, 64 * 1024 * 1024);
    // The tail for an error message reads the file's end only.
    appendFileSync(path, `${'z'.repeat(200_000)}\nthe last line\n`);
    assert.match(await consoleTailOf(path, 1), /the last line/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
