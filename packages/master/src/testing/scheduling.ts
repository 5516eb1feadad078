/** For benchmarks: the master's placement against a running cluster's database (bench/cluster.ts). */
export { NodeRegistry, type PlacementPolicy, type SchedulingNeed } from '../nodes/registry.ts';
export { openDatabase } from '../db/connect.ts';
