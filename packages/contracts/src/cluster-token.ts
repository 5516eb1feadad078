/**
 * The platform's internal token (cluster_token): every route of the masters and the lifecycle
 * replicas but their probes takes it in this header (docs/cluster.md, "Traffic between
 * components"). Every client of those routes sends it when it is set.
 */
export const CLUSTER_TOKEN_HEADER = 'x-svc-cluster-token';

/** The header to send, or none while cluster_token is unset. */
export function clusterHeaders(token: string | undefined): Record<string, string> {
  return token ? { [CLUSTER_TOKEN_HEADER]: token } : {};
}

/** A master's probes, open to load balancers and Prometheus: everything else takes the token. */
export const MASTER_OPEN_PATHS = ['/notify/health', '/metrics'];
/** A lifecycle replica's probes. */
export const LIFECYCLE_OPEN_PATHS = ['/health', '/metrics'];
