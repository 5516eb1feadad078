import { SvcError } from '@svc/common';
import type { BuildRequest, BuildSource } from '@svc/contracts/template-center';

/** What a template is built from, kept on the template row so a redo can rebuild it. */
export interface BuildRecipe {
  source: BuildSource;
  withSvcCa: boolean;
  /** 0 = fit the content plus headroom. */
  diskSizeMB: number;
}

/** The master's vault, as recipes use it (vault/vault.ts). */
export interface RecipeSealer {
  seal(plain: string, context: string): string;
  open(sealed: string, context: string): string;
}

/** A registry source's credentials as the template row keeps them: sealed with the vault's key. */
type StoredSource = BuildSource & { sealedAuth?: string };

const sealContext = (templateId: string) => `template-registry-auth:${templateId}`;

/**
 * The recipe as the template row keeps it (request_json): a registry's credentials sealed by the
 * vault, for the template alone (docs/security.md, "The secrets vault"). Until 2026-11-30 they were
 * kept in the clear, for anyone with the database, a backup or its file.
 */
export function storedRecipe(recipe: BuildRecipe, templateId: string, vault: RecipeSealer | undefined): string {
  const source = recipe.source;
  if (!vault || source.kind !== 'registry' || !source.auth) return JSON.stringify(recipe);
  const { auth, ...rest } = source;
  const stored: StoredSource = { ...rest, sealedAuth: vault.seal(JSON.stringify(auth), sealContext(templateId)) };
  return JSON.stringify({ ...recipe, source: stored });
}

/** The recipe a template row keeps, its credentials opened (a row from before the sealing has them in the clear). */
export function recipeOf(requestJson: string, templateId: string, vault: RecipeSealer | undefined): BuildRecipe {
  const recipe = JSON.parse(requestJson) as BuildRecipe & { source: StoredSource };
  const { sealedAuth, ...source } = recipe.source;
  if (sealedAuth === undefined) return recipe;
  const unopened = (why: string) => new SvcError(500, `template ${templateId}: its registry credentials cannot be opened (${why}); create the template again with them`);
  if (!vault) throw unopened('this master has no vault');
  let auth: { username: string; password: string };
  try {
    auth = JSON.parse(vault.open(sealedAuth, sealContext(templateId))) as typeof auth;
  } catch (err) {
    // A vault key dropped before this recipe was sealed again (docs/security.md, "The vault key").
    throw unopened((err as Error).message);
  }
  return { ...recipe, source: { ...source, auth } as BuildSource };
}

/**
 * The sealed credentials a stored recipe (request_json) holds, with their seal's context, and the
 * recipe with them sealed anew: for re-sealing under a new vault key (vault/sealed-columns.ts).
 */
export function sealedAuthOf(requestJson: string, templateId: string): { sealed: string; context: string } | undefined {
  const sealed = (JSON.parse(requestJson) as { source?: StoredSource }).source?.sealedAuth;
  return typeof sealed === 'string' ? { sealed, context: sealContext(templateId) } : undefined;
}

export function withSealedAuth(requestJson: string, sealed: string): string {
  const recipe = JSON.parse(requestJson) as BuildRecipe & { source: StoredSource };
  return JSON.stringify({ ...recipe, source: { ...recipe.source, sealedAuth: sealed } });
}

/** `queue` is the fair-share key the template center's slots take turns by: the template's team. */
export function buildRequest(recipe: BuildRecipe, ids: { jobId: string; templateId: string; artifactId: string; specHash: string; queue: string }): BuildRequest {
  return { ...ids, source: recipe.source, withSvcCa: recipe.withSvcCa, diskSizeMB: recipe.diskSizeMB };
}

/** The job row's RequestJSON: the request as sent, without registry credentials. */
export function redactedRequestJson(req: BuildRequest): string {
  const source = req.source.kind === 'registry' && req.source.auth
    ? { ...req.source, auth: { username: req.source.auth.username, password: '[redacted]' } }
    : req.source;
  return JSON.stringify({ ...req, source });
}
