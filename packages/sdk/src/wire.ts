/**
 * What the API gateway sends and expects (docs/api.md), read only by the SDK's mapping modules
 * (the public types are in types.ts). The sandbox routes' shapes come from the public API
 * contract (@svc/contracts), the document the gateway validates with; only type imports, so
 * nothing of it is bundled.
 */
export type {
  WireListedSandbox, WireNetworkConfig as WireNetwork, WireNewSandbox, WireSandbox, WireSandboxDetail, WireSandboxMetric, WireVolumeMount,
  WireTimeoutRequest, WireSnapshotRequest, WireSnapshotInfo, WireForkRequest, WireSandboxLogEntry, WireNodeDrain,
} from '@svc/contracts';

/** The template routes' shapes, from the contract the master serves them with. */
export type {
  TemplateCreate as WireTemplateCreate, TemplateInfo as WireTemplateInfo, JobInfo as WireJobInfo, JobAccepted as WireTemplateJobRef,
} from '@svc/contracts/template-routes';

/** The volume routes' shapes (E2B's Volume, VolumeAndToken and NewVolume). */
export type { VolumeAndToken as WireVolumeAndToken, NewVolume as WireNewVolume } from '@svc/contracts/volumes';

/** Node records are not pinned down by docs/api.md; these are the fields the SDK reads. */
export interface WireNode {
  id?: string;
  nodeID?: string;
  nodeId?: string;
  labels?: Record<string, string> | null;
  [key: string]: unknown;
}
