import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { templateCenterContract } from '@svc/contracts/template-center.contract';
import { writeMinimalRootfsTar } from './test-support/oci-builder.ts';
import { startHarness, TOKEN } from './test-support/harness.ts';

templateCenterContract('the template center (a real build)', async () => {
  const h = await startHarness();
  const scratch = mkdtempSync(join(tmpdir(), 'tc-contract-'));
  const tarball = join(scratch, 'rootfs.tar');
  await writeMinimalRootfsTar(tarball);
  return {
    url: h.tc.url,
    token: TOKEN,
    buildRequest: () => {
      const id = randomUUID();
      h.master.expect(`job-${id}`);
      return {
        jobId: `job-${id}`, templateId: 'tpl-contract', artifactId: `art-${id.slice(0, 8)}`, specHash: `spec-${id}`,
        source: { kind: 'rootfs-tar', path: tarball }, withSvcCa: false, diskSizeMB: 0,
      };
    },
    async built(req) {
      const r = await h.master.final(req.jobId);
      if (r.status !== 'BUILT' || !r.artifact) throw new Error(`build ${req.jobId} ended ${r.status}: ${r.error}`);
      return r.artifact;
    },
    async close() {
      await h.close();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
});
