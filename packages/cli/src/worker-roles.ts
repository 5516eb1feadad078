/**
 * The worker processes `svc` forks for its proxies (docs/design.md, "Proxies on every core"): the
 * same program started again with SVC_WORKER_ROLE, which runs that role's data path instead of
 * the command line.
 */
import { runWorker, type WorkerStart } from '@svc/common';

const ROLES: Record<string, () => Promise<WorkerStart>> = {
  proxy: async () => (await import('@svc/proxy/worker')).startProxyWorker,
  egress: async () => (await import('@svc/egress/worker')).startEgressWorker,
};

/** Runs the role; an unknown one is a bug of the primary that forked it, and ends the process. */
export async function runWorkerRole(role: string): Promise<void> {
  const load = ROLES[role];
  if (!load) {
    process.stderr.write(`svc: unknown worker role ${JSON.stringify(role)} (known: ${Object.keys(ROLES).join(', ')})\n`);
    process.exit(2);
  }
  runWorker(await load());
}
