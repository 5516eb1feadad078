/**
 * Every component of svc in one process, talking to each other over HTTP exactly as they do
 * when each runs on its own host.
 */
import { coordinationFor, sameProgramEntry, startTracing, workerCount, type Logger, type SvcConfig } from '@svc/common';
import { startApiGateway } from '@svc/api';
import { startEgressFromConfig } from '@svc/egress';
import { startLifecycle } from '@svc/lifecycle';
import { startMaster } from '@svc/master';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startNodeAgent } from '@svc/node-agent';
import { startProxy } from '@svc/proxy';
import { startTemplateCenter } from '@svc/template-center';

export interface Platform {
  apiUrl: string;
  sandboxUrl: string;
  /** The HTTPS listener of the data plane, when it runs. */
  sandboxHttpsUrl?: string;
  masterUrl: string;
  master: Awaited<ReturnType<typeof startMaster>>;
  /** The egress proxy's root CA, which templates bake in; absent when egress.enabled is false. */
  egressCaPem?: string;
  /** Warm sandboxes ready for hand-out on this host's node agent. */
  warmCount(): number;
  /** What runs this host's sandboxes when a create names no runtime. */
  runtime: 'gvisor' | 'microvm';
  /** Every runtime the host offers (only gvisor keeps a warm pool). */
  runtimes: Array<'gvisor' | 'microvm'>;
  close(): Promise<void>;
}

export async function startPlatform(cfg: SvcConfig, logger: Logger): Promise<Platform> {
  const coordination = coordinationFor(cfg.redis, { logger });
  const closers: Array<() => Promise<void>> = [async () => coordination.close()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch((err) => logger.warn({ err: (err as Error).message }, 'shutdown step failed'));
  };
  try {
    // One process, one SDK: every component's spans go out as service `svc` (OTEL_SERVICE_NAME
    // otherwise), told apart by their svc.component. Closed after every component (closers run in reverse).
    const tracing = await startTracing('svc', logger);
    closers.push(() => tracing.close());
    const master = await startMaster(cfg, { logger: logger.child({ component: 'master' }), coordination });
    closers.push(() => master.close());
    const tc = await startTemplateCenter(cfg, { logger: logger.child({ component: 'template-center' }), coordination, masterAddr: master.url });
    closers.push(() => tc.close());
    const masterInternal = new MasterInternalClient(master.url, { clusterToken: cfg.cluster_token });
    const lifecycleUrls: string[] = [];
    for (let i = 0; i < cfg.lifecycle.replicas; i++) {
      const lc = await startLifecycle(cfg, {
        logger: logger.child({ component: 'lifecycle' }), master: masterInternal, coordination, replicaIndex: i,
      });
      lifecycleUrls.push(lc.url);
      closers.push(() => lc.close());
    }
    // Both proxies' data paths run in worker processes of their own (docs/design.md, "Proxies on every core").
    const proxy = await startProxy(cfg, {
      logger: logger.child({ component: 'proxy' }), master: masterInternal, lifecycleUrls, clusterToken: cfg.cluster_token, coordination,
      workers: { count: workerCount(cfg.proxy.workers), entry: sameProgramEntry() },
    });
    closers.push(() => proxy.close());
    const node = await startNodeAgent(cfg, { logger: logger.child({ component: 'node-agent' }), masterAddr: master.url });
    // Stopping the platform stops every sandbox: nothing is left running behind it.
    closers.push(() => node.close({ destroySandboxes: true }));
    // After the node agent: it holds the address the proxy listens on.
    const egress = cfg.egress.enabled
      ? await startEgressFromConfig(cfg, { logger: logger.child({ component: 'egress' }), nodeId: node.nodeId, masterAddr: master.url, workerEntry: sameProgramEntry() })
      : undefined;
    if (egress) closers.push(() => egress.close());
    const api = await startApiGateway(cfg, {
      logger: logger.child({ component: 'api' }), masterUrl: master.url, sandboxUrl: proxy.httpUrl, publicSandboxUrl: proxy.httpsUrl ?? proxy.httpUrl,
    });
    closers.push(() => api.close());
    return { apiUrl: api.url, sandboxUrl: proxy.httpUrl, sandboxHttpsUrl: proxy.httpsUrl, masterUrl: master.url, master, ...(egress ? { egressCaPem: egress.caPem } : {}), warmCount: () => node.warmCount(), runtime: node.runtime, runtimes: node.runtimes, close };
  } catch (err) {
    await close();
    throw err;
  }
}
