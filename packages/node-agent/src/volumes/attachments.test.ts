import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import type { SvcError } from '@svc/common';
import type { VolumeMountOnNode, VolumeNodeHooks } from '@svc/contracts/volumes';
import { VolumePluginError } from '@svc/volumes';
import { VolumeAttachments } from './attachments.ts';

/** A logger that keeps every line, parsed. */
function recordingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>); } }) };
}

const mount = (volumeId: string, driver: string): VolumeMountOnNode => ({ volumeId, driver, privateData: '', path: '/mnt', readOnly: false });
const failure = (p: Promise<unknown>) => p.then(() => assert.fail('the attach succeeded'), (e: SvcError) => e);

describe('volume attachments: what a failed attach tells its caller', () => {
  const base = mkdtempSync(join(tmpdir(), 'svc-attachments-'));
  after(() => rmSync(base, { recursive: true, force: true }));

  const setup = (hooks: VolumeNodeHooks) => {
    const { logger, lines } = recordingLogger();
    const detached: string[] = [];
    const attachments = new VolumeAttachments({
      logger, nodeId: 'node-7', baseDir: base,
      hooksFor: () => ({ attach: hooks.attach, detach: async (i) => { detached.push(i.volumeId); await hooks.detach(i); } }),
    });
    return { attachments, lines, detached };
  };

  it('a plugin\'s own words (host paths) go to the node\'s log with the volume; the caller is told the plugin, volume and node', async () => {
    const { attachments, lines } = setup({
      attach: async () => { throw new VolumePluginError('local', 'attach', 'mount --bind /data/svc-shared/volume-data/vol-1 /base/local-vol-1: exit code 32'); },
      detach: async () => undefined,
    });
    const err = await failure(attachments.attach({ id: 'sb-1', kind: 'sandbox' }, [mount('vol-1', 'local')]));
    assert.equal(err.status, 500);
    assert.equal(err.message, 'the volume plugin \'local\' could not attach volume vol-1 on node node-7; the node\'s log has the detail');
    assert.ok(lines.some((l) => l.volumeId === 'vol-1' && String(l.err).includes('/data/svc-shared/volume-data/vol-1')), 'the detail is logged with the volume id');
    assert.deepEqual(attachments.list(), []);
  });

  it('a reason svc worded itself (an answer out of protocol) is passed on', async () => {
    const { attachments } = setup({
      attach: async () => { throw new VolumePluginError('odd', 'attach', 'answered no host_path', { forCaller: true }); },
      detach: async () => undefined,
    });
    const err = await failure(attachments.attach({ id: 'sb-2', kind: 'sandbox' }, [mount('vol-2', 'odd')]));
    assert.equal(err.message, 'the volume plugin \'odd\' could not attach volume vol-2 on node node-7: answered no host_path');
  });

  it('a host path outside the base directory is detached and refused without naming either path', async () => {
    const { attachments, lines, detached } = setup({
      attach: async () => ({ hostPath: '/etc', metadata: {} }),
      detach: async () => undefined,
    });
    const err = await failure(attachments.attach({ id: 'sb-3', kind: 'sandbox' }, [mount('vol-3', 'outside')]));
    assert.equal(err.status, 400);
    assert.match(err.message, /^the volume plugin 'outside' answered a host path for volume vol-3 on node node-7 that lies outside volume_plugin_base_dir/);
    assert.ok(!err.message.includes('/etc') && !err.message.includes(base), err.message);
    assert.deepEqual(detached, ['vol-3'], 'what the plugin mounted is undone');
    assert.ok(lines.some((l) => l.volumeId === 'vol-3' && l.hostPath === '/etc'));
  });
});
