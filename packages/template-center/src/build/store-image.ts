import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ArtifactStored, BuildRequest } from '@svc/contracts/template-center';
import { stage } from './build-error.ts';
import type { BuildContext } from './build-context.ts';
import { sha256File } from './file-sha256.ts';

/**
 * The end of every build: the image hashed, then moved into the store (UPLOADING); an artifact
 * stored by a build that was aborted meanwhile is deleted again.
 */
export async function storeImage(req: BuildRequest, ctx: BuildContext, imagePath: string, sizeBytes: number): Promise<ArtifactStored> {
  const { signal } = ctx;
  const sha256 = await stage('hashing the root filesystem', signal, () => sha256File(imagePath, signal));
  ctx.onPhase('UPLOADING');
  const artifact = await stage('storing the artifact', signal, () => ctx.store.put(req.artifactId, imagePath, { sha256, sizeBytes }, { move: true }));
  if (signal.aborted) {
    await ctx.store.delete(req.artifactId).catch((err: Error) => ctx.logger.warn({ artifactId: req.artifactId, err: err.message }, 'a cancelled build could not remove its artifact; the store sweep does'));
    await stage('storing the artifact', signal, async () => signal.throwIfAborted());
  }
  return artifact;
}

/** The egress CA a build bakes in (`withSvcCa`), or undefined before the egress proxy has made one. */
export async function readCa(ctx: BuildContext): Promise<string | undefined> {
  if (!ctx.caCertPath || !existsSync(ctx.caCertPath)) {
    // Info, not warn: the egress proxy that provides the CA comes later, so this happens on every build.
    ctx.logger.info({ caCertPath: ctx.caCertPath }, 'withSvcCa requested but no egress CA exists yet; building without it');
    return undefined;
  }
  const pem = await readFile(ctx.caCertPath, 'utf8');
  // Named by its setting: the message reaches the team, the host path is the operator's (logged).
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    ctx.logger.warn({ caCertPath: ctx.caCertPath }, 'the egress CA file holds no PEM certificate');
    throw new Error('template_center.ca_cert_file holds no PEM certificate');
  }
  return pem;
}
