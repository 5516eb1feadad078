import { randomUUID } from 'node:crypto';
import { templateCenterContract } from '@svc/contracts/template-center.contract';
import { FakeTemplateCenter } from './fake-template-center.ts';

const TOKEN = 'contract-token';

templateCenterContract('the master\'s FakeTemplateCenter', async () => {
  const fake = await new FakeTemplateCenter(TOKEN).start();
  return {
    url: fake.url,
    token: TOKEN,
    buildRequest: () => {
      const id = randomUUID();
      return {
        jobId: `job-${id}`, templateId: 'tpl-contract', artifactId: `art-${id.slice(0, 8)}`, specHash: `spec-${id}`,
        source: { kind: 'rootfs-tar', path: '/srv/rootfs.tar' }, withSvcCa: false, diskSizeMB: 0,
      };
    },
    // The fake builds nothing: a test finishes a build by storing its artifact, as here.
    built: async (req) => fake.storeArtifact(req.artifactId),
    close: () => fake.close(),
  };
});
