import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, silentLogger, type SvcConfig, whenMissing } from '@svc/common';
import { TemplateCenterClient, type BuildRequest, type BuildSource } from '@svc/contracts/template-center';
import { startTemplateCenter, type RunningTemplateCenter, type TemplateCenterOptions } from '../template-center.ts';
import { startFakeMaster, type FakeMaster } from './fake-master.ts';

export const TOKEN = 'test-callback-token';

export interface Harness {
  tc: RunningTemplateCenter;
  client: TemplateCenterClient;
  master: FakeMaster;
  coordination: MemoryCoordination;
  cfg: SvcConfig;
  dir: string;
  artifactDir: string;
  workDir: string;
  /** The template center's layer blob cache (its own, outside the work and artifact dirs). */
  blobCacheDir: string;
  submit(source: BuildSource, extra?: Partial<BuildRequest>): Promise<BuildRequest>;
  /** Files left in the work dir, the store's scratch dir and the blob cache's partial downloads (must be none after a job ends). */
  leftovers(): Promise<string[]>;
  close(): Promise<void>;
}

export async function startHarness(o: {
  token?: string; insecure?: boolean; artifactDir?: string; workDir?: string; tc?: Partial<TemplateCenterOptions>;
  /** Config of the template center beside the harness's own settings (its S3 store, say). */
  config?: Partial<SvcConfig['template_center']>;
} = {}): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'tc-test-'));
  const token = o.token ?? TOKEN;
  const master = await startFakeMaster(token);
  const cfg = defaultConfig(dir);
  // The tests' registries listen on loopback; a test of the refusal gives its own list.
  cfg.template_center.host_registries = '*';
  Object.assign(cfg.template_center, o.config);
  cfg.template_center.listen = '127.0.0.1:0';
  cfg.template_center.callback_token = token;
  cfg.template_center.insecure_no_token = o.insecure ?? false;
  const artifactDir = o.artifactDir ?? join(dir, 'artifacts');
  cfg.template_center.artifact_dir = artifactDir;
  const workDir = o.workDir ?? join(dir, 'work');
  const blobCacheDir = o.tc?.blobCacheDir ?? join(dir, 'blobs');
  const coordination = new MemoryCoordination();
  const tc = await startTemplateCenter(cfg, {
    logger: silentLogger(), coordination, masterAddr: master.url, workDir, blobCacheDir,
    callbackRetryMs: 30_000, progressTiming: { intervalMs: 200, heartbeatMs: 1000 }, ...o.tc,
  }).catch(async (err) => {
    await master.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  const client = new TemplateCenterClient(tc.url, token);
  return {
    tc, client, master, coordination, cfg, dir, artifactDir, workDir, blobCacheDir,
    submit: async (source, extra = {}) => {
      const id = randomUUID();
      const req: BuildRequest = {
        jobId: `job-${id}`, templateId: 'tpl-test', artifactId: `art-${id.slice(0, 8)}`, specHash: `spec-${id}`,
        source, withSvcCa: false, diskSizeMB: 0, ...extra,
      };
      master.expect(req.jobId);
      const res = await client.build(req);
      if (res.jobId !== req.jobId) throw new Error('wrong job id echoed');
      return req;
    },
    leftovers: async () => {
      const list = async (d: string) => (await readdir(d).catch(whenMissing([] as string[]))).map((n) => join(d, n));
      return [...await list(workDir), ...await list(join(artifactDir, '.tmp')), ...await list(join(blobCacheDir, 'tmp'))];
    },
    close: async () => {
      await tc.close();
      await master.close();
      await coordination.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
