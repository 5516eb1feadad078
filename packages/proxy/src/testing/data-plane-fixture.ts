/**
 * The platform the data-plane tests share: the proxy with its fake master and lifecycle replicas
 * (harness.ts), and two upstreams standing in for sandboxes, sbxa (answers as 'sbx-a') and sbxb
 * ('sbx-b'). Each test file starts it in its `before` hook and closes it in `after`.
 */
import { startPlatform, Upstream, type Platform } from './harness.ts';

export interface DataPlane { p: Platform; up: Upstream; other: Upstream }

export async function startDataPlane(): Promise<DataPlane> {
  const p = await startPlatform();
  const up = new Upstream('sbx-a');
  const other = new Upstream('sbx-b');
  await up.listen();
  await other.listen();
  p.master.add({ sandboxId: 'sbxa', envdPort: up.port });
  p.master.add({ sandboxId: 'sbxb', envdPort: other.port });
  return { p, up, other };
}

export async function closeDataPlane({ p, up, other }: DataPlane): Promise<void> {
  await p.close();
  await up.close();
  await other.close();
}

/** Polls `cond` every 5 ms; throws after `timeoutMs`. */
export async function waitFor(cond: () => boolean, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
