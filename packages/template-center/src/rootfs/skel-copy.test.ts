/**
 * /etc/skel's copy into the new user's home (skel-copy.ts, through injectSandboxEssentials): hard
 * links stay links, everything is charged to the build's unpack budget, and the copy lets the
 * event loop run. Before 2026-12-01 a 5 MiB layer with 200 hard links in /etc/skel became a
 * gigabyte in /home/user, copied synchronously while the template center did nothing else.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ImageTooLargeError, UnpackBudget } from '../layers/unpack-budget.ts';
import { injectSandboxEssentials } from './inject.ts';

const MiB = 1_048_576;
const roots: string[] = [];
after(() => { for (const r of roots) rmSync(r, { recursive: true, force: true }); });

/** A root with /etc/passwd (no `user`) and /etc/skel made by `fill`. */
function imageWithSkel(fill: (skel: string) => void): string {
  const root = mkdtempSync(join(tmpdir(), 'tc-skel-'));
  roots.push(root);
  mkdirSync(join(root, 'etc/skel'), { recursive: true });
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  fill(join(root, 'etc/skel'));
  return root;
}

test('hard links in /etc/skel stay hard links in the home, counted once; links are copied as links, FIFOs not at all, all owned by the user', async () => {
  const root = imageWithSkel((skel) => {
    writeFileSync(join(skel, 'f0'), Buffer.alloc(MiB, 7));
    for (let i = 1; i < 200; i++) linkSync(join(skel, 'f0'), join(skel, `f${i}`));
    mkdirSync(join(skel, '.config'));
    writeFileSync(join(skel, '.config/rc'), 'rc\n');
    chmodSync(join(skel, '.config'), 0o750);
    writeFileSync(join(skel, 'suid'), '#!/bin/sh\n', { mode: 0o4755 });
    chmodSync(join(skel, 'suid'), 0o4755);
    symlinkSync('/etc/passwd', join(skel, 'to-passwd'));
    spawnSync('mkfifo', [join(skel, 'pipe')]);
  });
  // 1 MiB of data and 204 entries: well within 3 MiB; 200 copies would be 200 MiB.
  const made = await injectSandboxEssentials(root, { budget: new UnpackBudget(3 * MiB) });
  assert.equal(made.userCreated, true);
  const home = join(root, 'home/user');
  const f0 = lstatSync(join(home, 'f0'));
  assert.equal(f0.nlink, 200);
  for (let i = 1; i < 200; i++) assert.equal(lstatSync(join(home, `f${i}`)).ino, f0.ino);
  assert.equal(readFileSync(join(home, '.config/rc'), 'utf8'), 'rc\n');
  assert.equal(lstatSync(join(home, '.config')).mode & 0o7777, 0o750);
  assert.equal(readlinkSync(join(home, 'to-passwd')), '/etc/passwd', 'verbatim, not followed');
  assert.equal(existsSync(join(home, 'pipe')), false, 'a FIFO is not copied (it would wait for a writer)');
  for (const name of ['', 'f0', '.config', '.config/rc', 'to-passwd', 'suid']) assert.equal(lstatSync(join(home, name)).uid, made.uid, name);
  assert.equal(lstatSync(join(home, 'suid')).mode & 0o6000, 0, 'the set-uid bit of the image\'s file is not the user\'s');
});

test('the copy is charged to the build\'s budget: past it the build fails', async () => {
  const root = imageWithSkel((skel) => {
    for (let i = 0; i < 3; i++) writeFileSync(join(skel, `big${i}`), Buffer.alloc(MiB, i));
  });
  await assert.rejects(injectSandboxEssentials(root, { budget: new UnpackBudget(2 * MiB) }),
    (e: Error) => e instanceof ImageTooLargeError && /^\/etc\/skel unpacks past 2 MiB/.test(e.message));
  const many = imageWithSkel((skel) => { for (let i = 0; i < 50; i++) writeFileSync(join(skel, `e${i}`), ''); });
  await assert.rejects(injectSandboxEssentials(many, { budget: new UnpackBudget(Infinity, 20) }), /^Error: \/etc\/skel unpacks to more than 20 files/);
});

test('an /etc/skel that holds /home itself (a link to /) is copied without copying the home into itself', async () => {
  const root = imageWithSkel(() => {});
  rmSync(join(root, 'etc/skel'), { recursive: true });
  symlinkSync('/', join(root, 'etc/skel'));
  writeFileSync(join(root, 'hello'), 'hi\n');
  await injectSandboxEssentials(root, { budget: new UnpackBudget(64 * MiB) });
  const home = join(root, 'home/user');
  assert.equal(readFileSync(join(home, 'hello'), 'utf8'), 'hi\n');
  assert.deepEqual(readdirSync(join(home, 'home')), [], 'the home is not copied into itself');
});

test('the copy lets the event loop run', async () => {
  const root = imageWithSkel((skel) => { for (let i = 0; i < 400; i++) writeFileSync(join(skel, `f${i}`), Buffer.alloc(16 * 1024, i)); });
  let ticks = 0;
  const timer = setInterval(() => { ticks++; }, 0);
  try {
    await injectSandboxEssentials(root, {});
  } finally {
    clearInterval(timer);
  }
  assert.equal(readdirSync(join(root, 'home/user')).length, 400);
  assert.ok(ticks > 0, 'timers ran while /etc/skel was copied');
});
