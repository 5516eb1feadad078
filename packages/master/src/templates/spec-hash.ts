import { createHash } from 'node:crypto';
import type { BuildSource } from '@svc/contracts/template-center';

/**
 * Identity of a build spec: everything that decides the artifact's content (source, platform,
 * CA bake, disk size), and nothing that does not (registry credentials, cpu, memory, alias).
 * Two templates with the same spec hash can share one artifact.
 */
export function specHash(source: BuildSource, withSvcCa: boolean, diskSizeMB: number): string {
  const { auth: _auth, ...identity } = source as BuildSource & { auth?: unknown };
  return createHash('sha256').update(canonicalJson({ source: identity, withSvcCa, diskSizeMB })).digest('hex');
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => a.localeCompare(b));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
