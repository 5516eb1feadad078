/**
 * Registry mirrors (template_center.registry_mirrors) with a real registry on loopback (Debian's
 * docker-registry, pushed with skopeo): a Docker Hub reference is served by the first mirror that
 * has it; other registries never go to a mirror. No case here falls through to Docker Hub itself,
 * which no test may reach.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OciLayoutWriter } from '../test-support/oci-builder.ts';
import { pushLayout, startRegistry, type TestRegistry } from '../test-support/registry-server.ts';
import { resolveRegistryImage } from './registry-source.ts';

let registry: TestRegistry;
let scratch: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-mirrors-'));
  const w = new OciLayoutWriter(join(scratch, 'layout'));
  await w.tag({ layers: [{ entries: [{ name: 'hello.txt', content: 'from the mirror' }] }] }, 'v1');
  await w.write();
  registry = await startRegistry();
  // Where a Docker Hub mirror keeps docker.io/library/mirrored:v1 and docker.io/team/app:v1.
  await pushLayout(join(scratch, 'layout'), 'v1', `${registry.host}/library/mirrored:v1`);
  await pushLayout(join(scratch, 'layout'), 'v1', `${registry.host}/team/app:v1`);
});

after(async () => {
  await registry?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

test('a Docker Hub image comes from the first mirror that serves it, a dead mirror skipped; its layers come from there too', async () => {
  const warnings: string[] = [];
  const logger = { warn: (o: { mirror: string }) => warnings.push(o.mirror) } as never;
  for (const ref of ['mirrored:v1', 'docker.io/library/mirrored:v1', 'team/app:v1']) {
    const image = await resolveRegistryImage({ kind: 'registry', ref }, AbortSignal.timeout(30_000), { mirrors: ['http://127.0.0.1:1', `http://${registry.host}/`], logger });
    assert.equal(image.layers.length, 1, ref);
    const blob = await image.layers[0]!.open(AbortSignal.timeout(30_000));
    let bytes = 0;
    for await (const chunk of blob) bytes += (chunk as Buffer).length;
    assert.equal(bytes, image.layers[0]!.size, `${ref}: the layer downloads from the mirror`);
  }
  assert.deepEqual([...new Set(warnings)], ['http://127.0.0.1:1'], 'the dead mirror is logged and skipped');
});

test('an image of another registry never goes to a mirror', async () => {
  const listed = { hostRegistries: [registry.host] };
  const image = await resolveRegistryImage({ kind: 'registry', ref: `${registry.host}/team/app:v1` }, AbortSignal.timeout(30_000), { mirrors: ['http://127.0.0.1:1'], ...listed });
  assert.equal(image.layers.length, 1);
  await assert.rejects(
    resolveRegistryImage({ kind: 'registry', ref: `${registry.host}/team/none:v1` }, AbortSignal.timeout(30_000), { mirrors: [`http://${registry.host}`], ...listed }),
    (err: Error) => !/mirrors tried/.test(err.message),
  );
});

test('a registry on this host is pulled from only when template_center.host_registries names it (or says *); a mirror there needs no naming', async () => {
  const [address, port] = registry.host.split(':') as [string, string];
  const refused = (ref: string, hostRegistries: string[] = []) => assert.rejects(
    resolveRegistryImage({ kind: 'registry', ref }, AbortSignal.timeout(30_000), { hostRegistries }),
    (err: Error & { status?: number }) => {
      assert.equal(err.status, 403);
      assert.match(err.message, /is on the host the template center runs on \(.* is loopback\); builds pull from a registry there only when the operator names it in template_center\.host_registries \(SVC_HOST_REGISTRIES\)/);
      return true;
    },
  );
  await refused(`${registry.host}/team/app:v1`);
  await refused(`localhost:${port}/team/app:v1`, [registry.host]);
  await refused(`${registry.host}/team/app:v1`, [`${address}:1`]);
  for (const hostRegistries of [[registry.host], [`  ${registry.host.toUpperCase()}`.trim()], ['*']]) {
    const image = await resolveRegistryImage({ kind: 'registry', ref: `${registry.host}/team/app:v1` }, AbortSignal.timeout(30_000), { hostRegistries });
    assert.equal(image.layers.length, 1, JSON.stringify(hostRegistries));
  }
  // The mirror is the operator's own: named in registry_mirrors, it is on the host and serves.
  const mirrored = await resolveRegistryImage({ kind: 'registry', ref: 'team/app:v1' }, AbortSignal.timeout(30_000), { mirrors: [`http://${registry.host}`] });
  assert.equal(mirrored.layers.length, 1);
});
