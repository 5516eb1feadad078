import { after } from 'node:test';
import { MemoryCoordination } from './memory-coordination.ts';
import { coordinationContract } from './redis-coordination.contract.ts';

const shared = new MemoryCoordination();
after(() => shared.close());

coordinationContract({
  // One process, one store: both handles are the same instance.
  pair: async () => [shared, shared],
  settle: async () => {},
});
