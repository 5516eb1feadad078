import { badRequest } from '@svc/common';
import type { E2bBuildStart } from '@svc/contracts/template-routes';

/** The base image E2B's `Template()` starts from when nothing else is named: our `base` template. */
const E2B_DEFAULT_IMAGE = /^(?:docker\.io\/)?e2bdev\/base(?::[\w.-]+)?$/;
/** The tag of a template's current build (E2B's). */
export const DEFAULT_TAG = 'default';
const TAG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export type Step = NonNullable<E2bBuildStart['steps']>[number];

/** What a build starts from: a template, or a registry image (made a template first). */
export type BaseSpec = { kind: 'template'; ref: string } | { kind: 'image'; image: string; auth?: { username: string; password: string } };

/** The base a start request names, after its checks (each a 400 naming what is wrong). */
export function checkSpec(spec: E2bBuildStart): BaseSpec {
  const { fromImage, fromTemplate } = spec;
  if (!!fromImage === !!fromTemplate) throw badRequest('exactly one of fromImage and fromTemplate must be given');
  for (const [i, s] of (spec.steps ?? []).entries()) {
    const args = s.args ?? [];
    const where = `steps[${i}] (${s.type})`;
    if (s.type === 'COPY') {
      const [src, dest, owner, mode] = args;
      if (!src || src.startsWith('/') || src.split('/').includes('..')) throw badRequest(`${where}: args[0] must be a path inside the build context`);
      if (!dest) throw badRequest(`${where}: args[1] must be the destination`);
      if (owner && !/^[a-z_][a-z0-9_.-]{0,31}(:[a-z_][a-z0-9_.-]{0,31})?$/i.test(owner)) throw badRequest(`${where}: ${owner} is not user or user:group`);
      if (mode && !/^[0-7]{3,4}$/.test(mode)) throw badRequest(`${where}: mode ${mode} is not an octal mode`);
      if (!s.filesHash || !/^[0-9a-f]{64}$/.test(s.filesHash)) throw badRequest(`${where}: filesHash must be the files hash of 64 hex digits`);
    }
    if (s.type === 'RUN' && !args[0]?.trim()) throw badRequest(`${where}: args[0] must be the command`);
    if (s.type === 'ENV' && (args.length === 0 || args.length % 2 !== 0 || args.some((a, k) => k % 2 === 0 && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(a)))) {
      throw badRequest(`${where}: args must be name, value pairs with names of letters, digits and _`);
    }
    if ((s.type === 'WORKDIR' || s.type === 'USER') && (args.length !== 1 || !args[0])) throw badRequest(`${where}: args must be one value`);
    if (s.type === 'USER' && !/^[a-z_][a-z0-9_.-]{0,31}$/i.test(args[0])) throw badRequest(`${where}: ${args[0]} is not a user name`);
  }
  if (fromTemplate) return { kind: 'template', ref: fromTemplate };
  if (E2B_DEFAULT_IMAGE.test(fromImage!)) return { kind: 'template', ref: 'base' };
  const auth = registryAuth(spec.fromImageRegistry);
  return { kind: 'image', image: fromImage!, ...(auth ? { auth } : {}) };
}

/**
 * fromImageRegistry as registry credentials: `registry` {username, password} as they are; `gcp`
 * as the `_json_key` login Google's registries take; `aws` needs ECR's token API: refused.
 */
function registryAuth(r: E2bBuildStart['fromImageRegistry']): { username: string; password: string } | undefined {
  if (r === undefined || r === null) return undefined;
  const reg = r as { type?: unknown; username?: unknown; password?: unknown; serviceAccountJson?: unknown };
  if (reg.type === 'registry') {
    if (typeof reg.username !== 'string' || !reg.username || typeof reg.password !== 'string') throw badRequest('fromImageRegistry of type registry needs username and password');
    return { username: reg.username, password: reg.password };
  }
  if (reg.type === 'gcp') {
    if (typeof reg.serviceAccountJson !== 'string' || !reg.serviceAccountJson) throw badRequest('fromImageRegistry of type gcp needs serviceAccountJson');
    return { username: '_json_key', password: reg.serviceAccountJson };
  }
  if (reg.type === 'aws') throw badRequest('fromImageRegistry of type aws (ECR) is not supported by svc: give the registry\'s username and password (type registry), e.g. from `aws ecr get-login-password`');
  throw badRequest('fromImageRegistry.type must be registry, gcp or aws');
}

/** `name` or `name:tag`. */
export function splitRef(ref: string): [string, string | undefined] {
  const [name, tag, ...rest] = ref.split(':');
  if (rest.length || tag === '' || !name) throw badRequest(`${JSON.stringify(ref)} is not name or name:tag`);
  return [name, tag];
}

export function checkTags(tags: string[]): string[] {
  for (const t of tags) if (!TAG.test(t)) throw badRequest(`tag ${JSON.stringify(t)} is not valid: letters, digits, '.', '_' and '-', at most 128`);
  return [...new Set(tags)];
}
