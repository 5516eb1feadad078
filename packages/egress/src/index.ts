export { startEgressProxy, type EgressProxy, type EgressProxyOptions } from './egress-proxy.ts';
export { startEgressFromConfig, type EgressFromConfigOptions } from './from-config.ts';
export { EgressCa, type LeafCertificate } from './certificates.ts';
export type { PolicyStore } from './policy-store.ts';
export type { Destination } from './original-destination.ts';
export { PlaceholderResolver, PlaceholderError, type PlaceholderSource, type PlaceholderSources } from './placeholders.ts';
export type { EgressWorkerStats } from './worker-protocol.ts';
