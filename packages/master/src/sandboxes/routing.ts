import { notFound, unauthorized, type SvcError } from '@svc/common';
import type { SignedFileRequest } from '@svc/common/envd-signature';
import type { SignerLookup } from './signer-lookup.ts';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import { toRoute } from './record.ts';

export async function routeOf(c: SandboxContext, id: string): Promise<SandboxRoute> {
  const row = await c.d.repo.get(id);
  if (!row) throw notFound(`sandbox ${id} not found`);
  return toRoute(row);
}

/**
 * The route of the live sandbox whose envd access token produced a file URL's signature
 * (SignerLookup). The caller still checks the signature against that sandbox, expiry included.
 * A sandbox ended since the tokens were read signs nothing.
 */
export async function routeBySignature(c: SandboxContext, signers: SignerLookup, signed: SignedFileRequest): Promise<SandboxRoute> {
  const id = await signers.signerOf(signed);
  const route = id === undefined ? undefined : await routeOf(c, id).catch((err: SvcError) => {
    // Its row went (purged) since the tokens were read: it signs nothing. Anything else is the caller's to see.
    if (err.status === 404) return undefined;
    throw err;
  });
  if (!route || route.state === 'terminated' || route.state === 'killing') throw unauthorized('invalid signature: no sandbox signed this file URL');
  return route;
}
