export { startLifecycle, DEFAULT_LIFECYCLE_TUNING, type LifecycleDeps, type LifecycleTuning, type RunningLifecycle } from './lifecycle.ts';
