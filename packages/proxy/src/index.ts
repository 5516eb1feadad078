export { startProxy, DEFAULT_PROXY_TUNING, type ProxyDeps, type ProxyTuning, type RunningProxy } from './proxy.ts';
export type { ProxyWorkerStats } from './worker-protocol.ts';
