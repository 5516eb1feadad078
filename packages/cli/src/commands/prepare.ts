/** `svc prepare`: what `svc up`'s first start would make on this machine, made ahead of it. */
import { Command } from 'commander';
import { defaultConfig } from '@svc/common';

export function prepareCommand(): Command {
  return new Command('prepare')
    .description('make what a first `svc up` needs on this machine ahead of time: the base image from Debian\'s packages (cached in /var/cache/svc) and the host probes (gVisor platform, whether a KVM guest boots); scripts/setup.sh runs it while native modules compile')
    .action(async (_flags: unknown, c: Command) => {
      const globals = c.optsWithGlobals() as { json?: boolean };
      // Loaded on demand, as `svc up` is: the other commands should start fast.
      const [{ ensureDebianImage }, { probeHost }, pino] = await Promise.all([import('@svc/template-center'), import('@svc/node-agent'), import('pino')]);
      const say = (line: string) => { if (!globals.json) process.stdout.write(`${line}\n`); };
      const logger = pino.default({ level: process.env.SVC_LOG_LEVEL ?? 'warn' });
      const started = Date.now();
      const [image, probes] = await Promise.all([
        ensureDebianImage({ flavor: 'base', onProgress: (p) => { if (p.phase !== 'cached') say(`prepare: base image from Debian's packages: ${p.phase}`); } }),
        probeHost({ logger, guestKernelDir: process.env.SVC_GUEST_KERNEL_DIR || defaultConfig().node_agent.guest_kernel_dir }),
      ]);
      const result = { baseImage: image.path, cached: image.cached, ...probes, seconds: Math.round((Date.now() - started) / 1000) };
      if (globals.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else say(`prepare: done in ${result.seconds} s (base image ${image.cached ? 'was cached' : 'made'}; gVisor platform ${probes.gvisorPlatform ?? 'not probed'}; KVM guest ${probes.kvmBootsGuest === undefined ? 'not probed' : probes.kvmBootsGuest ? 'boots' : 'does not boot'})`);
    });
}
