import type { ArtifactStored } from '@svc/contracts/template-center';

export type ArtifactLocation =
  | { kind: 'file'; path: string; sha256: string; sizeBytes: number }
  | { kind: 'redirect'; url: string };

/** Where built root filesystems live: a local directory or an S3-compatible bucket. */
export interface ArtifactStore {
  readonly kind: 'local' | 's3';
  /** Directory for an image being written; on the store's filesystem when that saves a copy. */
  readonly scratchDir: string;
  /** The largest file put() takes, in bytes; unset when only the disk's room limits it. */
  readonly maxArtifactBytes?: number;
  init(): Promise<void>;
  /** Whether the store is reachable (health). */
  ready(): Promise<boolean>;
  /** Stores `file` under `artifactId`; with `move` the file is consumed (renamed or deleted). */
  put(artifactId: string, file: string, meta: { sha256: string; sizeBytes: number }, opts: { move: boolean }): Promise<ArtifactStored>;
  /** Removes the artifact; false when there was nothing to remove. */
  delete(artifactId: string): Promise<boolean>;
  locate(artifactId: string): Promise<ArtifactLocation | null>;
  /** The stored artifact's record, as the store has it now (no cache); null when it is not stored. */
  get(artifactId: string): Promise<ArtifactStored | null>;
}

const ARTIFACT_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function isValidArtifactId(id: unknown): id is string {
  return typeof id === 'string' && ARTIFACT_ID_RE.test(id);
}
