export * from './errors.ts';
export * from './http-client.ts';
export * from './http-server.ts';
export * from './log.ts';
export * from './coordination.ts';
export * from './memory-coordination.ts';
export * from './config.ts';
export * from './ids.ts';
export { RedisCoordination, coordinationFor } from './redis-coordination.ts';
