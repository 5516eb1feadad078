export { startLifecycle, DEFAULT_LIFECYCLE_TUNING, type LifecycleDeps, type LifecycleTuning, type RunningLifecycle } from './lifecycle.ts';
export * from './api.ts';
export { ProxyRegistry } from './proxy-registry.ts';
