import { createHash } from 'node:crypto';
import type { BuildSource } from '@svc/contracts/template-center';

/**
 * Identity of a build spec: everything that decides the artifact's content (source, platform,
 * CA bake, disk size), and nothing that does not (cpu, memory, alias). Two templates with the
 * same spec hash can share one artifact, a running build and, for the builder's image bases, the
 * template itself. So a pull with registry credentials is the team's that gave them (`puller`,
 * its team id): the credentials themselves stay out, but another team naming the same private
 * image, without them, must never be handed what they pulled. A source without credentials
 * hashes as it always did.
 */
export function specHash(source: BuildSource, withSvcCa: boolean, diskSizeMB: number, puller: string): string {
  const { auth, ...identity } = source as BuildSource & { auth?: unknown };
  const spec = { source: identity, withSvcCa, diskSizeMB, ...(auth ? { pulledBy: puller } : {}) };
  return createHash('sha256').update(canonicalJson(spec)).digest('hex');
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => a.localeCompare(b));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
