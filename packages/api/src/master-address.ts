/**
 * The master as the gateway calls it: its base URL, and the headers every call carries
 * (cluster_token's, docs/cluster.md). The team header is added per request, never here.
 */
export interface MasterAddress {
  url: string;
  headers: Record<string, string>;
}
