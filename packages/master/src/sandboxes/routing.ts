import { notFound, unauthorized } from '@svc/common';
import { fileSignatureProblem, type SignedFileRequest } from '@svc/common/envd-signature';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import { toRoute } from './record.ts';

export async function routeOf(c: SandboxContext, id: string): Promise<SandboxRoute> {
  const row = await c.d.repo.get(id);
  if (!row) throw notFound(`sandbox ${id} not found`);
  return toRoute(row);
}

/**
 * Which live sandbox's envd access token produced a file URL's signature: one hash per secured
 * sandbox, compared in constant time (docs/benchmarks.md, signed URL look-up). The caller
 * still checks the signature against that sandbox, expiry included.
 */
export async function routeBySignature(c: SandboxContext, signed: SignedFileRequest): Promise<SandboxRoute> {
  for (const tok of await c.d.repo.envdTokens()) {
    if (fileSignatureProblem(signed, tok.token, 0) === undefined) return routeOf(c, tok.sandboxId);
  }
  throw unauthorized('invalid signature: no sandbox signed this file URL');
}
