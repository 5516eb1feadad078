import type { ArtifactRef } from '@svc/contracts/node-agent';
import type { ArtifactRow } from './tables.ts';

/** Node agents always download through the master, whatever the store behind it. */
function artifactDownloadUrl(masterAddr: string, artifactId: string): string {
  return `${masterAddr.replace(/\/+$/, '')}/svc/template/artifact/download?artifact_id=${encodeURIComponent(artifactId)}`;
}

/** With the store's own path when it is local: a node agent on the same disk links it (ArtifactRef.localPath). */
export function artifactRef(masterAddr: string, a: ArtifactRow): ArtifactRef {
  return {
    artifactId: a.artifact_id, sha256: a.sha256 ?? '', sizeBytes: Number(a.size_bytes ?? 0), downloadUrl: artifactDownloadUrl(masterAddr, a.artifact_id),
    ...(a.storage === 'local' && a.location?.startsWith('/') ? { localPath: a.location } : {}),
  };
}
