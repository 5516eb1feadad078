/**
 * A real Prometheus (Debian's `prometheus` package, installed by scripts/setup.sh --test) that
 * scrapes `svc up`'s API /metrics every second with the admin key, as docs/observability.md's
 * scrape config does, on a free loopback port with its storage in a temporary directory.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@svc/common';
import { waitFor } from './harness.ts';

export const PROMETHEUS_BIN = '/usr/bin/prometheus';

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface RunningPrometheus {
  url: string;
  /** An instant query (GET /api/v1/query): the vector it answers. */
  query(expr: string): Promise<PromSample[]>;
  stop(): Promise<void>;
}

export async function startPrometheus(target: { apiUrl: string; apiKey: string }): Promise<RunningPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-prometheus-'));
  const port = await freePort();
  // YAML takes JSON as it is.
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify({
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    scrape_configs: [{
      job_name: 'svc', metrics_path: '/metrics', scheme: 'http',
      authorization: { credentials: target.apiKey },
      static_configs: [{ targets: [new URL(target.apiUrl).host] }],
    }],
  }));
  const child = spawn(PROMETHEUS_BIN, [
    `--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`,
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr = (stderr + d).slice(-8_000); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor('Prometheus to be ready', async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${stderr}`);
      return (await fetch(`${url}/-/ready`)).ok ? true : undefined;
    }, 30_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    async query(expr) {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
      const body = await res.json() as { status: string; error?: string; data?: { result: PromSample[] } };
      if (body.status !== 'success') throw new Error(`query ${expr}: ${body.error ?? res.status}`);
      return body.data!.result;
    },
    stop,
  };
}
