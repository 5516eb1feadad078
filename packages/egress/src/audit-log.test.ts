import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { silentLogger, type Logger } from '@svc/common';
import { REDACTED } from '@svc/contracts/egress';
import type { EgressRequestRecord } from '@svc/contracts/egress-audit';
import { AuditLog, auditTimestamp, redactSecrets } from './audit-log.ts';
import { realRotationFs, type RotationFs } from './audit-rotation.ts';

const request = (i: number, extra: Partial<EgressRequestRecord> = {}): EgressRequestRecord => ({
  ts: auditTimestamp(), sandbox_ip: '10.0.0.2', dst_ip: '10.9.9.9', dst_port: 443, scheme: 'https', host: 'api.example.test',
  method: 'GET', path: `/item/${i}`, status: 200, bytes_in: 0, bytes_out: 12, latency_ms: 3, tls_version: 'TLSv1.3',
  cipher: 'TLS_AES_128_GCM_SHA256', upstream_status: '200', upstream_addr: '10.9.9.9:443', ...extra,
});

test('JSON Lines appended to a new file in new directories, mode 0640, one whole line per record', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-'));
  try {
    const path = join(dir, 'log', 'svc-egress', 'access.jsonl');
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [] });
    for (let i = 0; i < 2000; i++) log.write(request(i));
    log.write({ type: 'security_event', ts: auditTimestamp(), sandbox_ip: '10.0.0.2', rule: '', reason: 'default_deny', host: 'x.test' });
    await log.close();
    assert.equal((await stat(path)).mode & 0o777, 0o640);
    const lines = (await readFile(path, 'utf8')).split('\n');
    assert.equal(lines.pop(), '');
    assert.equal(lines.length, 2001);
    lines.forEach((line, i) => {
      const r = JSON.parse(line);
      if (i < 2000) { assert.equal(r.path, `/item/${i}`); assert.equal('type' in r, false); }
    });
    assert.equal(JSON.parse(lines[2000]).type, 'security_event');

    const again = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [] });
    again.write(request(9999));
    await again.close();
    again.write(request(10000)); // after close: dropped, and said so in the operational log
    assert.equal((await readFile(path, 'utf8')).split('\n').length, 2003);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a live secret never reaches the file, raw or JSON-escaped', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-'));
  try {
    const path = join(dir, 'access.jsonl');
    const secrets = ['sk-live-123', 'quote"and\\slash'];
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => secrets });
    log.write(request(1, { path: '/leak?key=sk-live-123' }));
    log.write(request(2, { host: 'quote"and\\slash' }));
    await log.close();
    const text = await readFile(path, 'utf8');
    assert.equal(text.includes('sk-live-123'), false);
    assert.equal(text.includes('and\\\\slash'), false);
    assert.equal(text.split(REDACTED).length - 1, 2);
    assert.equal(redactSecrets('a $&$&$&$& b', ['$&$&$&$&']), `a ${REDACTED} b`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with a thousand live secrets each is redacted, a secret holding another whole, regex characters as they are', () => {
  const secrets = new Set(Array.from({ length: 1000 }, (_, i) => `sk-${i}-value`));
  secrets.add('abcdefgh');
  secrets.add('abcdefghijk');
  secrets.add('a.c(d)*e');
  const line = JSON.stringify({ path: '/x?k=sk-999-value&j=sk-0-value', host: 'abcdefghijk.test', note: 'a.c(d)*e and axc(d)*e' });
  const out = redactSecrets(line, secrets);
  assert.equal(out.includes('sk-999-value') || out.includes('sk-0-value'), false);
  assert.ok(out.includes(`${REDACTED}.test`), 'the longer secret is replaced whole, not its prefix');
  assert.ok(out.includes(`${REDACTED} and axc(d)*e`), 'a dot in a secret matches a dot only');
  assert.equal(redactSecrets(line, secrets), out, 'the same set again (its compiled redactor) redacts the same');
});

test('timestamps are ISO 8601 with a numeric offset', () => {
  assert.match(auditTimestamp(new Date('2026-01-02T03:04:05.678Z')), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$/);
  const ts = auditTimestamp(new Date('2026-01-02T03:04:05.678Z'));
  assert.equal(Date.parse(ts), Date.parse('2026-01-02T03:04:05.678Z'));
});

/** A temp dir for one test, removed after it. */
async function inTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'egress-audit-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A logger whose error lines the test can read (the rest is silent). */
function recordingLogger(): { logger: Logger; errors: Array<{ obj: Record<string, unknown>; msg: string }> } {
  const errors: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  const logger = silentLogger();
  logger.error = ((obj: Record<string, unknown>, msg: string) => { errors.push({ obj, msg }); }) as Logger['error'];
  return { logger, errors };
}

/** The live file and every rotated one, oldest first: path.N … path.1, path. */
async function auditFiles(path: string): Promise<string[]> {
  const dir = join(path, '..');
  const base = path.slice(dir.length + 1);
  const rotated = (await readdir(dir)).filter((n) => /^\d+$/.test(n.slice(base.length + 1)) && n.startsWith(`${base}.`))
    .map((n) => Number(n.slice(base.length + 1))).sort((a, b) => b - a);
  return [...rotated.map((n) => `${path}.${n}`), path];
}

/** The record numbers (path /item/N) of a file's lines, each line checked to be whole JSON. */
async function itemsOf(file: string): Promise<number[]> {
  const lines = (await readFile(file, 'utf8')).split('\n');
  assert.equal(lines.pop(), '', `${file} ends with a newline`);
  return lines.map((line) => Number((JSON.parse(line) as { path: string }).path.split('/').pop()));
}

/** Waits (polling) until `cond` holds, failing after 5 s. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (const deadline = Date.now() + 5000; !cond(); await new Promise((r) => setTimeout(r, 10))) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

test('rotation by size under load: every record exactly once, whole and in order, no file past the limit', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    const maxBytes = 64 * 1024;
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], maxBytes, keep: 1000 });
    // A tight loop (every rotation after the first is queued behind it), then bursts that let rotations run between writes.
    for (let i = 0; i < 10_000; i++) log.write(request(i));
    for (let i = 10_000; i < 20_000; i++) {
      log.write(request(i));
      if (i % 250 === 0) await tick();
    }
    await log.close();
    const files = await auditFiles(path);
    assert.ok(files.length > 50, `${files.length} files`);
    const all: number[] = [];
    for (const f of files) {
      const st = await stat(f);
      assert.ok(st.size > 0 && st.size <= maxBytes, `${f}: ${st.size} bytes`);
      assert.equal(st.mode & 0o777, 0o640, f);
      all.push(...await itemsOf(f));
    }
    assert.deepEqual(all, range(0, 20_000));
  });
});

test('keep=2: older rotated files are deleted, ones left by a larger keep too', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    await writeFile(join(dir, 'access.jsonl.7'), 'left by keep=10\n');
    await writeFile(join(dir, 'access.jsonl.x'), 'not ours\n');
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], maxBytes: 4096, keep: 2 });
    for (let i = 0; i < 200; i++) {
      log.write(request(i));
      if (i % 10 === 0) await tick();
    }
    await log.close();
    assert.deepEqual((await readdir(dir)).sort(), ['access.jsonl', 'access.jsonl.1', 'access.jsonl.2', 'access.jsonl.x']);
    const kept = [...await itemsOf(`${path}.2`), ...await itemsOf(`${path}.1`), ...await itemsOf(path)];
    assert.deepEqual(kept, range(200 - kept.length, 200), 'the newest records, contiguous and in order');
    assert.ok(kept.length < 100);
  });
});

test('daily rotation: a record on a later local day starts a new file; an empty file is never rotated', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    let now = new Date(2026, 0, 15, 23, 59, 0);
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], now: () => now });
    now = new Date(2026, 0, 17, 12, 0, 0); // days pass with nothing written: nothing to rotate
    log.write(request(0));
    log.write(request(1));
    now = new Date(2026, 0, 17, 23, 59, 59, 999);
    log.write(request(2));
    now = new Date(2026, 0, 18, 0, 0, 0);
    log.write(request(3));
    log.write(request(4));
    await tick();
    now = new Date(2026, 0, 18, 18, 0, 0);
    log.write(request(5));
    now = new Date(2026, 0, 19, 0, 0, 1);
    log.write(request(6));
    await log.close();
    assert.deepEqual(await auditFiles(path), [`${path}.2`, `${path}.1`, path]);
    assert.deepEqual(await itemsOf(`${path}.2`), [0, 1, 2]);
    assert.deepEqual(await itemsOf(`${path}.1`), [3, 4, 5]);
    assert.deepEqual(await itemsOf(path), [6]);
  });
});

test('daily rotation of a file left by an earlier run, dated by its first record', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    const yesterday = new Date(2026, 2, 9, 22, 0, 0);
    await writeFile(path, `${JSON.stringify(request(0, { ts: auditTimestamp(yesterday) }))}\n`);
    let now = new Date(2026, 2, 10, 0, 30, 0);
    const log = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], now: () => now });
    log.write(request(1));
    await log.close();
    assert.deepEqual(await itemsOf(`${path}.1`), [0]);
    assert.deepEqual(await itemsOf(path), [1]);

    // Same day as its first record: appended to.
    now = new Date(2026, 2, 10, 23, 0, 0);
    const again = await AuditLog.open(path, { logger: silentLogger(), secretsFor: () => [], now: () => now });
    again.write(request(2));
    await again.close();
    assert.deepEqual(await itemsOf(path), [1, 2]);
  });
});

test('a failed rename is logged, the current file takes every record, and rotation is retried a minute later', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    const { logger, errors } = recordingLogger();
    let failures = 1;
    const fs: RotationFs = {
      ...realRotationFs,
      rename: async (from, to) => {
        if (failures > 0 && from === path) {
          failures--;
          throw Object.assign(new Error(`EACCES: permission denied, rename '${from}'`), { code: 'EACCES' });
        }
        await rename(from, to);
      },
    };
    let now = new Date(2026, 4, 1, 12, 0, 0);
    const log = await AuditLog.open(path, { logger, secretsFor: () => [], maxBytes: 8192, keep: 100, now: () => now, fs });
    for (let i = 0; i < 300; i++) log.write(request(i));
    await tick();
    for (let i = 300; i < 600; i++) log.write(request(i));
    await until(() => errors.length > 0, 'the rotation error');
    assert.equal(errors.length, 1, JSON.stringify(errors.map((e) => e.msg)));
    assert.equal(errors[0].obj.path, path);
    assert.match(String(errors[0].obj.err), /EACCES/);
    assert.deepEqual(await auditFiles(path), [path], 'not rotated yet');

    now = new Date(now.getTime() + 61_000);
    for (let i = 600; i < 900; i++) log.write(request(i));
    await log.close();
    const files = await auditFiles(path);
    assert.ok(files.length > 2);
    const all: number[] = [];
    for (const f of files) all.push(...await itemsOf(f));
    assert.deepEqual(all, range(0, 900));
    assert.equal((await itemsOf(files[0])).length, 600, 'the oversized file holds everything up to the retry');
  });
});

test('a new file that cannot be opened: the rename is undone, logged, and no record is lost', async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'access.jsonl');
    const { logger, errors } = recordingLogger();
    let sabotage = true;
    const fs: RotationFs = {
      ...realRotationFs,
      rename: async (from, to) => {
        // A directory where the new file should be makes the open fail (EISDIR); it is cleared before the undo.
        if (from === `${path}.1` && to === path) await rm(path, { recursive: true });
        await rename(from, to);
        if (sabotage && from === path) {
          sabotage = false;
          await mkdir(path);
        }
      },
    };
    let now = new Date(2026, 4, 1, 12, 0, 0);
    const log = await AuditLog.open(path, { logger, secretsFor: () => [], maxBytes: 8192, keep: 100, now: () => now, fs });
    for (let i = 0; i < 100; i++) log.write(request(i));
    await until(() => errors.length > 0, 'the rotation error');
    assert.equal(errors.length, 1, JSON.stringify(errors.map((e) => e.msg)));
    assert.equal(errors[0].obj.path, path);
    assert.match(String(errors[0].obj.err), /EISDIR/);
    assert.deepEqual(await auditFiles(path), [path]);
    for (let i = 100; i < 200; i++) log.write(request(i));
    now = new Date(now.getTime() + 61_000);
    for (let i = 200; i < 300; i++) log.write(request(i));
    await log.close();
    const all: number[] = [];
    for (const f of await auditFiles(path)) all.push(...await itemsOf(f));
    assert.deepEqual(all, range(0, 300));
  });
});

test('a read-only directory: the rename fails, is logged, and the current file takes every record', { skip: process.getuid?.() === 0 && 'root ignores directory permissions' }, async () => {
  await inTempDir(async (dir) => {
    const path = join(dir, 'log', 'access.jsonl');
    const { logger, errors } = recordingLogger();
    const log = await AuditLog.open(path, { logger, secretsFor: () => [], maxBytes: 4096 });
    await chmod(join(dir, 'log'), 0o555);
    try {
      for (let i = 0; i < 200; i++) log.write(request(i));
      await log.close();
    } finally {
      await chmod(join(dir, 'log'), 0o755);
    }
    assert.equal(errors.length, 1);
    assert.equal(errors[0].obj.path, path);
    assert.deepEqual(await itemsOf(path), range(0, 200));
  });
});

test('a secret shorter than 8 characters is not redacted: one team\'s `"` or `10.` would have taken it out of every line of the node', () => {
  const line = JSON.stringify({ sandbox_ip: '10.0.0.2', host: 'api.example.com', path: '/v1' });
  assert.equal(redactSecrets(line, ['"', '10.', 'api', 'long-enough-secret']), line);
  assert.equal(JSON.parse(redactSecrets(line.replace('/v1', '/v1/long-enough-secret'), ['"', 'long-enough-secret'])).path, `/v1/${REDACTED}`);
});
