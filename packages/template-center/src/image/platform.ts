import type { Descriptor, ImageIndex, Platform } from './oci-types.ts';

const NODE_TO_OCI_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', s390x: 's390x', ppc64: 'ppc64le', riscv64: 'riscv64' };

export function hostPlatform(): Platform {
  return { os: 'linux', architecture: NODE_TO_OCI_ARCH[process.arch] ?? process.arch };
}

export const formatPlatform = (p: Platform) => `${p.os}/${p.architecture}${p.variant ? `/${p.variant}` : ''}`;

/** arm64 images are often labelled v8 or not at all; treat both as the same. */
function normVariant(p: Platform): string | undefined {
  if (p.architecture === 'arm64' && (p.variant === 'v8' || !p.variant)) return undefined;
  return p.variant || undefined;
}

/** Picks the manifest for `want` from an index; attestation manifests (unknown/unknown) never match. */
export function selectPlatform(index: ImageIndex, want: Platform, what: string): Descriptor {
  const candidates = index.manifests.filter((d) => d.platform && d.platform.os !== 'unknown');
  const match = candidates.find((d) => {
    const p = d.platform!;
    if (p.os !== want.os || p.architecture !== want.architecture) return false;
    return !want.variant || normVariant(p) === normVariant(want);
  });
  if (match) return match;
  // An index without platform fields (some OCI layouts) with a single image: take it.
  const untagged = index.manifests.filter((d) => !d.platform);
  if (candidates.length === 0 && untagged.length === 1) return untagged[0];
  const available = candidates.map((d) => formatPlatform(d.platform!)).join(', ') || 'none';
  throw new Error(`no image for platform ${formatPlatform(want)} in ${what} (available: ${available})`);
}
