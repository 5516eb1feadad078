import { badRequest } from '@svc/common';
import { PAUSE_KINDS, RUNTIME_KINDS as RUNTIMES, type PauseKind, type RuntimeKind } from '@svc/contracts/node-agent';
import type { RegisterNode } from '@svc/contracts/master-internal';
import { checkLabels } from '@svc/contracts/node-labels';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** A node agent's registration, checked field by field before it reaches the database. */
export function parseRegisterNode(body: unknown): RegisterNode {
  if (!isObject(body)) throw badRequest('body must be a RegisterNode object');
  const { nodeId, address, runtime, runtimes, pauseKinds, capacity, pausedResourceReleaseRatio, version, egressAdminUrl, features, labels } = body;
  if (typeof nodeId !== 'string' || nodeId.length === 0 || nodeId.length > 256 || /[\u0000-\u001f\u007f/]/.test(nodeId)) throw badRequest('nodeId must be 1-256 characters, without control characters or /');
  if (typeof address !== 'string' || !/^https?:\/\/[^\s]{1,2048}$/.test(address) || !URL.canParse(address)) throw badRequest('address must be the node agent\'s http(s) base URL');
  if (!RUNTIMES.includes(runtime as RuntimeKind)) throw badRequest(`runtime must be one of ${RUNTIMES.join(', ')}`);
  if (runtimes !== undefined && (!Array.isArray(runtimes) || runtimes.length === 0 || runtimes[0] !== runtime || new Set(runtimes).size !== runtimes.length
    || !runtimes.every((k) => RUNTIMES.includes(k as RuntimeKind)))) {
    throw badRequest(`runtimes must list ${RUNTIMES.join(' and/or ')} once each, the default runtime first`);
  }
  if (!Array.isArray(pauseKinds) || !pauseKinds.every((k) => PAUSE_KINDS.includes(k as PauseKind))) throw badRequest(`pauseKinds must be a list of ${PAUSE_KINDS.join(', ')}`);
  if (!isObject(capacity) || !isCount(capacity.cpuCount) || !isCount(capacity.memoryMB)) throw badRequest('capacity must be {cpuCount, memoryMB} of non-negative integers');
  if (typeof pausedResourceReleaseRatio !== 'number' || !(pausedResourceReleaseRatio >= 0 && pausedResourceReleaseRatio <= 1)) {
    throw badRequest('pausedResourceReleaseRatio must be a number in [0, 1]');
  }
  if (typeof version !== 'string' || version.length > 128) throw badRequest('version must be a string of at most 128 characters');
  if (egressAdminUrl !== undefined && (typeof egressAdminUrl !== 'string' || !/^https?:\/\/[^\s]{1,2048}$/.test(egressAdminUrl) || !URL.canParse(egressAdminUrl))) {
    throw badRequest('egressAdminUrl must be the egress proxy\'s admin http(s) base URL');
  }
  if (features !== undefined && (!Array.isArray(features) || features.length > 64 || !features.every((f) => typeof f === 'string' && /^[a-z0-9_.-]{1,64}$/.test(f)))) {
    throw badRequest('features must be a list of at most 64 feature names');
  }
  return {
    nodeId, address, runtime: runtime as RuntimeKind, ...(runtimes ? { runtimes: runtimes as RuntimeKind[] } : {}), pauseKinds: pauseKinds as PauseKind[],
    capacity: { cpuCount: capacity.cpuCount as number, memoryMB: capacity.memoryMB as number }, pausedResourceReleaseRatio, version,
    ...(egressAdminUrl ? { egressAdminUrl } : {}),
    ...(features ? { features: features as string[] } : {}),
    ...(labels !== undefined ? { labels: checkLabels(labels, 'labels') } : {}),
  };
}
