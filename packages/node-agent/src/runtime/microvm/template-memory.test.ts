import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { mapsTemplateMemory, memoryArgs, withOwnMemory } from './template-memory.ts';
import { qemuFeatures } from './qemu-features.ts';

const QEMU = 'qemu-system-x86_64';
const noQemu = spawnSync(QEMU, ['--version']).status !== 0 ? `${QEMU} is missing` : undefined;

describe('a guest\'s memory backend on QEMU\'s command line', () => {
  it('maps the template\'s file shared for the template guest, copy-on-write for a clone, read-only where QEMU can', () => {
    assert.deepEqual(memoryArgs(undefined, 256), []);
    const template = memoryArgs({ kind: 'template-file', path: '/t/memory.ram', share: true, readOnly: true }, 256);
    assert.deepEqual(template, ['-object', 'memory-backend-file,id=mem,size=256M,mem-path=/t/memory.ram,share=on', '-machine', 'memory-backend=mem'],
      'the template guest writes its file: never read-only');
    const clone72 = memoryArgs({ kind: 'template-file', path: '/t/memory.ram', share: false }, 256);
    assert.equal(clone72[1], 'memory-backend-file,id=mem,size=256M,mem-path=/t/memory.ram,share=off');
    const clone10 = memoryArgs({ kind: 'template-file', path: '/t/memory.ram', share: false, readOnly: true }, 256);
    assert.equal(clone10[1], 'memory-backend-file,id=mem,size=256M,mem-path=/t/memory.ram,share=off,readonly=on,rom=off');
    assert.ok(mapsTemplateMemory(clone72) && mapsTemplateMemory(clone10) && !mapsTemplateMemory(template));
  });

  it('a paused clone resumes on anonymous RAM of the same block name', () => {
    const argv = ['-m', '256M', ...memoryArgs({ kind: 'template-file', path: '/t/memory.ram', share: false, readOnly: true }, 256), '-kernel', 'k'];
    const own = withOwnMemory(argv, 256);
    assert.deepEqual(own, ['-m', '256M', '-object', 'memory-backend-ram,id=mem,size=256M', '-machine', 'memory-backend=mem', '-kernel', 'k']);
    assert.ok(!mapsTemplateMemory(own));
  });
});

describe('what the QEMU binary offers', { skip: noQemu ?? false }, () => {
  it('reads the version and whether memory-backend-file takes rom= (QEMU 8.2 and later)', async () => {
    const f = await qemuFeatures(QEMU);
    const m = /version (\d+)\.(\d+)/.exec(f.version);
    assert.ok(m, f.version);
    const [major, minor] = [Number(m[1]), Number(m[2])];
    assert.equal(f.fileRomOption, major > 8 || (major === 8 && minor >= 2));
  });

  it('refuses a binary that is not QEMU, and one that is not there', async () => {
    await assert.rejects(qemuFeatures('/bin/true'), /not QEMU's version/);
    await assert.rejects(qemuFeatures('/nonexistent/qemu'));
  });
});
