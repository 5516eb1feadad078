/**
 * An operator's backup and restore (docs/configuration.md, "Backing up an embedded install"):
 * `svc backup` while `svc up` runs, the platform stopped, `svc restore` into a new data directory,
 * and `svc up` on it. What a team made before the backup is there after: its key, its secret's
 * record, a volume's file and a snapshot a sandbox starts from, through the official SDK.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { Sandbox, Secret, Volume } from 'e2b';
import { Team } from '@svc/sdk';
import { SVC_BIN, startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

const BACKUP = '/tmp/svc-e2e-backup';
const KEYS = '/tmp/svc-e2e-backup-vault-key';
const RESTORED = '/tmp/svc-e2e-restored';
for (const dir of [BACKUP, KEYS, RESTORED]) rmSync(dir, { recursive: true, force: true });

let p: RunningPlatform | undefined;
diagnoseFailures(() => p);
after(async () => {
  await p?.stop();
  for (const dir of [BACKUP, KEYS, RESTORED]) rmSync(dir, { recursive: true, force: true });
});

function svc(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(process.execPath, [SVC_BIN, ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME } }, (err, stdout, stderr) => {
      res({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

test('svc backup while svc up runs, svc restore into a new data directory: a team\'s key, secret, volume and snapshot come back', { timeout: 1_200_000 }, async () => {
  p = await startPlatform();
  // The SDK's volume content calls take their URL from the environment (E2B_VOLUME_API_URL).
  useE2bEnv(p);
  const e2b = (apiKey: string) => ({ apiKey, apiUrl: p!.apiUrl, domain: p!.domain, sandboxUrl: p!.sandboxUrl });
  const team = await Team.create(`e2e-backup-${Date.now().toString(36)}`, { apiUrl: p.apiUrl, apiKey: p.apiKey });
  const asTeam = e2b(team.apiKey);
  await Secret.create('backed-up', 'secret-value', asTeam);
  const vol = await Volume.create(`backed-up-${Date.now()}`, asTeam);
  await vol.writeFile('/kept.txt', 'in the volume');
  const origin = await Sandbox.create('base', asTeam);
  let snapshotId = '';
  try {
    await origin.files.write('/home/user/kept.txt', 'in the snapshot');
    snapshotId = (await origin.createSnapshot()).snapshotId;
  } finally {
    await origin.kill();
  }

  const made = await svc(['--data-dir', p.dataDir, 'backup', BACKUP, '--vault-key-to', KEYS, '--artifacts', '--volumes', '--json']);
  assert.equal(made.code, 0, made.stderr);
  const manifest = JSON.parse(made.stdout) as { items: Array<{ to: string }>; notIncluded: string[] };
  assert.deepEqual(manifest.items.map((i) => i.to).filter((t) => !t.startsWith('/')), ['master.sqlite', 'secrets.json', 'egress-ca', 'artifacts', 'volumes']);
  // What the backup holds goes from the shared data directory, which later files start on (a
  // snapshot left there would hold the base template in later runs).
  await Sandbox.deleteSnapshot(snapshotId, asTeam);
  assert.equal(await Volume.destroy(vol.volumeId, asTeam), true);
  await Secret.destroy('backed-up', asTeam);
  const adminKey = p.apiKey;
  await p.stop();
  p = undefined;

  const back = await svc(['--data-dir', RESTORED, 'restore', BACKUP, '--vault-key-from', KEYS, '--json']);
  assert.equal(back.code, 0, back.stderr);
  p = await startPlatform({ dataDir: RESTORED });
  useE2bEnv(p);
  assert.equal(p.apiKey, adminKey, 'the generated admin key came back');
  const asTeamAgain = e2b(team.apiKey);
  assert.equal((await Secret.getInfo('backed-up', asTeamAgain)).name, 'backed-up', 'the team\'s key works, and its secret is there');
  const volAgain = await Volume.connect(vol.volumeId, asTeamAgain);
  assert.equal(await volAgain.readFile('/kept.txt'), 'in the volume');
  const restored = await Sandbox.create(snapshotId, asTeamAgain);
  try {
    assert.equal(await restored.files.read('/home/user/kept.txt'), 'in the snapshot');
  } finally {
    await restored.kill();
  }
});
