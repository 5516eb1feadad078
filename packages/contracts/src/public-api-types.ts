/**
 * The TypeScript types of the public REST wire, derived by the compiler from the schemas the
 * gateway validates with (public-api-schemas.ts), so a type cannot drift from the document.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type * as S from './public-api-schemas.ts';

/** A schema's wire type; a property with a default stays optional (the sender may leave it out). */
type Wire<Schema extends JSONSchema> = FromSchema<Schema, { keepDefaultedPropertiesOptional: true }>;

export type WireError = Wire<typeof S.ErrorBody>;
export type WireNewSandbox = Wire<typeof S.NewSandbox>;
export type WireNetworkConfig = Wire<typeof S.NetworkConfig>;
export type WireVolumeMount = Wire<typeof S.VolumeMount>;
export type WireMountedVolume = Wire<typeof S.MountedVolume>;
export type WireSandbox = Wire<typeof S.Sandbox>;
export type WireListedSandbox = Wire<typeof S.ListedSandbox>;
export type WireSandboxDetail = Wire<typeof S.SandboxDetail>;
export type WireTimeoutRequest = Wire<typeof S.TimeoutRequest>;
export type WirePauseRequest = Wire<typeof S.PauseRequest>;
export type WireSetTimeout = Wire<typeof S.SetTimeout>;
export type WireRefresh = Wire<typeof S.Refresh>;
export type WireNetworkUpdate = Wire<typeof S.NetworkUpdate>;
export type WireSandboxMetric = Wire<typeof S.SandboxMetric>;
export type WireSandboxLogEntry = Wire<typeof S.SandboxLogEntry>;
export type WireSandboxLogs = Wire<typeof S.SandboxLogs>;
export type WireSandboxLogsV2 = Wire<typeof S.SandboxLogsV2Response>;
export type WireSvcSetTimeout = Wire<typeof S.SvcSetTimeout>;
export type WireSvcRefresh = Wire<typeof S.SvcRefresh>;
export type WireSvcDeadline = Wire<typeof S.SvcDeadline>;
export type WireSnapshotRequest = Wire<typeof S.SnapshotRequest>;
export type WireSnapshotInfo = Wire<typeof S.SnapshotInfo>;
export type WireForkRequest = Wire<typeof S.ForkRequest>;
export type WireForkResult = Wire<typeof S.ForkResult>;
export type WireNode = Wire<typeof S.Node>;
export type WireNodeLabels = Wire<typeof S.NodeLabels>;
export type WireNodeLabelNames = Wire<typeof S.NodeLabelNames>;
export type WireNodeDrain = Wire<typeof S.NodeDrain>;
