/**
 * Directories an upload creates for its user, under concurrent uploads: the SDK's
 * files.write([...]) sends one request per file at once, all into the same new directory.
 */
import assert from 'node:assert/strict';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createTarget } from '../http/upload-target.ts';
import type { Caller } from './user-access.ts';

const NOBODY = 65534;
const who: Caller = { name: 'nobody', uid: NOBODY, gid: NOBODY, gids: [NOBODY] };
const store = { set() {} } as unknown as Parameters<typeof createTarget>[1]['store'];
let base: string;

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'envd-user-dirs-'));
  await chmod(base, 0o755);
});
after(() => rm(base, { recursive: true, force: true }));

async function upload(path: string): Promise<void> {
  const target = await createTarget(path, { who, metadata: undefined, store, contentLength: undefined });
  await target.write(Buffer.from('x'));
  await target.end();
}

test('uploads at once into one new directory all succeed, the directories their user\'s', { skip: process.getuid?.() !== 0 ? 'needs root' : false }, async () => {
  const failures: string[] = [];
  for (let round = 0; round < 40; round++) {
    const home = join(base, `home-${round}`);
    await rm(home, { recursive: true, force: true });
    await mkdir(home, { mode: 0o755 });
    await chown(home, NOBODY, NOBODY);
    const results = await Promise.allSettled(['a', 'b', 'c'].map((n) => upload(join(home, 'new/sub', n))));
    for (const r of results) if (r.status === 'rejected') failures.push(String((r.reason as Error).message));
    if (failures.length > 0) break;
    for (const n of ['a', 'b', 'c']) assert.equal(await readFile(join(home, 'new/sub', n), 'utf8'), 'x');
    for (const dir of ['new', 'new/sub']) assert.equal((await stat(join(home, dir))).uid, NOBODY, `${dir} is the user's`);
  }
  assert.deepEqual(failures, [], `round failed: ${failures.join('; ')}`);
});
