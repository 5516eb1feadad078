/**
 * Template center build times and pull throughput, in one run:
 *   - headline: the build's PULLING phase (resolve, download every layer, verify, write it to the
 *     blob cache) against `skopeo copy docker://… oci:DIR` (download and write) of the same
 *     3-layer image of about 100 MB (incompressible data, gzip layers) from a local
 *     docker-registry, alternating, medians, as a ratio (skopeo time / PULLING time: 1 or more
 *     means at least as fast). The blob cache is emptied before each of these builds;
 *   - PULLING again with every layer in the blob cache (hits are hashed again, nothing downloaded);
 *   - this registry client alone (download and verify, nothing written);
 *   - the whole build of that image, and `base` from the machine-wide cached tarball and cold
 *     (mmdebstrap into a fresh cache dir).
 *
 *   node --import tsx bench/template-center.ts [--runs 7] [--skip-cold]
 *
 * Prints a table and writes bench/results/template-center.json. Needs root, docker-registry,
 * skopeo, mmdebstrap and Debian's mirror (cold base only).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { buildBaseRootfs } from '../packages/template-center/src/base-template.ts';
import type { BuildSource } from '@svc/contracts/template-center';
import { resolveRegistryImage } from '../packages/template-center/src/image/registry-source.ts';
import { startHarness, type Harness } from '../packages/template-center/src/test-support/harness.ts';
import { OciLayoutWriter } from '../packages/template-center/src/test-support/oci-builder.ts';
import { pushLayout, startRegistry } from '../packages/template-center/src/test-support/registry-server.ts';

const args = process.argv.slice(2);
const runs = Number(args[args.indexOf('--runs') + 1]) || 7;
const skipCold = args.includes('--skip-cold');
const MB = 1024 * 1024;

interface BuildTiming { totalMs: number; pullMs: number; buildMs: number; uploadMs: number; sizeBytes: number }

async function timedBuild(h: Harness, source: BuildSource): Promise<BuildTiming> {
  const t0 = performance.now();
  const req = await h.submit(source);
  const r = await h.master.final(req.jobId, 20 * 60_000);
  if (r.status !== 'BUILT') throw new Error(`build failed: ${r.error}`);
  const at = (phase: string) => h.master.events.find((e) => e.jobId === req.jobId && e.report.status === 'RUNNING' && e.report.phase === phase)!.at;
  const end = h.master.events.find((e) => e.jobId === req.jobId && e.report.status === 'BUILT')!.at;
  await h.client.deleteArtifact(req.artifactId);
  return { totalMs: end - t0, pullMs: at('BUILDING') - t0, buildMs: at('UPLOADING') - at('BUILDING'), uploadMs: end - at('UPLOADING'), sizeBytes: r.artifact!.sizeBytes };
}

function run(cmd: string, argv: string[]): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${cmd}: ${err}`))));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const scratch = mkdtempSync(join(tmpdir(), 'tc-bench-'));
  const h = await startHarness();
  const results: Record<string, unknown> = {};
  try {
    // --- base template
    const cached = await buildBaseRootfs();
    const baseFromCache = await timedBuild(h, { kind: 'rootfs-tar', path: cached.path });
    results.baseCached = { tarballBytes: cached.sizeBytes, rootfsCachedAlready: cached.cached, tarballMs: cached.durationMs, ...baseFromCache };
    if (!skipCold) {
      const coldDir = join(scratch, 'base-cache');
      const phases: Array<{ phase: string; atMs: number }> = [];
      const cold = await buildBaseRootfs({ cacheDir: coldDir, rebuild: true, onProgress: (p) => phases.push({ phase: p.phase, atMs: p.elapsedMs }) });
      const coldBuild = await timedBuild(h, { kind: 'rootfs-tar', path: cold.path });
      results.baseCold = { mmdebstrapMs: cold.durationMs, tarballBytes: cold.sizeBytes, phases, ...coldBuild, totalWithMmdebstrapMs: cold.durationMs + coldBuild.totalMs };
    }

    // --- 3-layer image of ~100 MB
    const registry = await startRegistry();
    try {
      const layout = join(scratch, 'layout');
      const w = new OciLayoutWriter(layout);
      const sizes = [40 * MB, 30 * MB, 30 * MB];
      const img = await w.tag({
        layers: sizes.map((size, i) => ({
          entries: [
            { name: `layer${i}/`, type: 'directory' as const },
            ...Array.from({ length: 200 }, (_, j) => ({ name: `layer${i}/small-${j}.txt`, content: `file ${j} of layer ${i}\n` })),
            ...Array.from({ length: 4 }, (_, j) => ({ name: `layer${i}/big-${j}.bin`, content: randomBytes(size / 4) })),
          ],
        })),
      }, 'v1');
      await w.write();
      const compressedBytes = img.layers.reduce((n, l) => n + l.size, 0);
      const ref = `${registry.host}/bench/image:v1`;
      await pushLayout(layout, 'v1', ref);

      const source: BuildSource = { kind: 'registry', ref, insecure: true };
      const emptyCache = () => {
        for (const algo of readdirSync(h.blobCacheDir).filter((n) => n !== 'tmp')) rmSync(join(h.blobCacheDir, algo), { recursive: true, force: true });
      };
      // Both sides start with no dirty pages left by whatever ran before (the last build wrote ~300 MB).
      const settle = () => { spawnSync('sync'); };
      const coldBuild = async () => { emptyCache(); settle(); return timedBuild(h, source); };
      const skopeoCopy = async (i: number) => {
        const dest = join(scratch, `skopeo-${i}`);
        settle();
        try { return await run('skopeo', ['copy', '--quiet', '--src-tls-verify=false', `docker://${ref}`, `oci:${dest}:v1`]); } finally { rmSync(dest, { recursive: true, force: true }); }
      };
      // One of each first, unmeasured, so neither side pays for a cold page cache or first start.
      await coldBuild();
      await skopeoCopy(-1);

      const image: BuildTiming[] = [];
      const cached: BuildTiming[] = [];
      const clientOnly: number[] = [];
      const skopeo: number[] = [];
      for (let i = 0; i < runs; i++) {
        // Same run, alternating (and which goes first alternates too), so load hits both alike.
        if (i % 2 === 0) {
          image.push(await coldBuild());
          skopeo.push(await skopeoCopy(i));
        } else {
          skopeo.push(await skopeoCopy(i));
          image.push(await coldBuild());
        }
        cached.push(await timedBuild(h, source));
        clientOnly.push(await pullOnly(ref));
      }
      const mbps = (ms: number) => compressedBytes / MB / (ms / 1000);
      const pull = median(image.map((b) => b.pullMs));
      const skopeoMs = median(skopeo);
      results.image = {
        layers: 3, compressedBytes, runs,
        pullingVsSkopeo: {
          pullingMs: pull, skopeoMs, ratio: skopeoMs / pull,
          // Each run's pair on its own: less sensitive to load that changes during the run.
          medianPairRatio: median(skopeo.map((ms, i) => ms / image[i].pullMs)),
          pullingAllMs: image.map((b) => b.pullMs), skopeoAllMs: skopeo,
        },
        build: { totalMs: median(image.map((b) => b.totalMs)), pullMs: pull, buildMs: median(image.map((b) => b.buildMs)), uploadMs: median(image.map((b) => b.uploadMs)), ext4Bytes: image[0].sizeBytes, all: image },
        buildWithLayersCached: { totalMs: median(cached.map((b) => b.totalMs)), pullMs: median(cached.map((b) => b.pullMs)), buildMs: median(cached.map((b) => b.buildMs)), all: cached },
        throughputMBps: {
          buildPullPhase: mbps(pull),
          buildPullPhaseLayersCached: mbps(median(cached.map((b) => b.pullMs))),
          registryClientOnly: mbps(median(clientOnly)),
          skopeoCopy: mbps(skopeoMs),
        },
        ratioVsSkopeo: {
          buildPullPhase: skopeoMs / pull,
          registryClientOnly: skopeoMs / median(clientOnly),
        },
        rawMs: { clientOnly, skopeo },
      };
    } finally {
      await registry.stop();
    }
  } finally {
    await h.close();
    rmSync(scratch, { recursive: true, force: true });
  }

  const out = { bench: 'template-center', at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), ...results };
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'template-center.json'), JSON.stringify(out, null, 2) + '\n');
  printTable(out as never);
}

/** This registry client alone: every layer downloaded and its digest verified, nothing written. */
async function pullOnly(ref: string): Promise<number> {
  const t0 = performance.now();
  const image = await resolveRegistryImage({ kind: 'registry', ref, insecure: true }, new AbortController().signal, { hostRegistries: ['*'] });
  await Promise.all(image.layers.map(async (l) => {
    const hash = createHash('sha256');
    for await (const chunk of await l.open(new AbortController().signal)) hash.update(chunk as Buffer);
    if (`sha256:${hash.digest('hex')}` !== l.digest) throw new Error('digest mismatch');
  }));
  return performance.now() - t0;
}

function printTable(r: {
  loadavg: number[]; baseCached: BuildTiming & { tarballBytes: number }; baseCold?: BuildTiming & { mmdebstrapMs: number; totalWithMmdebstrapMs: number };
  image: {
    compressedBytes: number; runs: number;
    pullingVsSkopeo: { pullingMs: number; skopeoMs: number; ratio: number; medianPairRatio: number };
    build: { totalMs: number; pullMs: number; buildMs: number; uploadMs: number; ext4Bytes: number };
    buildWithLayersCached: { totalMs: number; pullMs: number; buildMs: number };
    throughputMBps: Record<string, number>; ratioVsSkopeo: Record<string, number>;
  };
}) {
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  const v = r.image.pullingVsSkopeo;
  const rows: Array<[string, string]> = [
    [`PULLING vs skopeo copy (${(r.image.compressedBytes / MB).toFixed(0)} MB, 3 layers, median of ${r.image.runs})`, `${ms(v.pullingMs)} vs ${ms(v.skopeoMs)}: ratio ${v.ratio.toFixed(2)}`],
    ['  median of the per-run ratios', v.medianPairRatio.toFixed(2)],
    ['base from cached tarball (build total)', s(r.baseCached.totalMs)],
    ['  resolve / unpack+mkfs+sha / store', `${s(r.baseCached.pullMs)} / ${s(r.baseCached.buildMs)} / ${s(r.baseCached.uploadMs)}`],
    ...(r.baseCold ? [
      ['base cold: mmdebstrap', s(r.baseCold.mmdebstrapMs)] as [string, string],
      ['base cold: mmdebstrap + build', s(r.baseCold.totalWithMmdebstrapMs)] as [string, string],
    ] : []),
    [`image ${(r.image.compressedBytes / MB).toFixed(0)} MB, 3 layers (build total)`, s(r.image.build.totalMs)],
    ['  pull / unpack+mkfs+sha / store', `${s(r.image.build.pullMs)} / ${s(r.image.build.buildMs)} / ${s(r.image.build.uploadMs)}`],
    ['image build, layers cached (total)', s(r.image.buildWithLayersCached.totalMs)],
    ['  pull (verify cached) / unpack+mkfs+sha', `${s(r.image.buildWithLayersCached.pullMs)} / ${s(r.image.buildWithLayersCached.buildMs)}`],
    ['pull MB/s: build PULLING phase', r.image.throughputMBps.buildPullPhase.toFixed(1)],
    ['pull MB/s: PULLING, layers cached', r.image.throughputMBps.buildPullPhaseLayersCached.toFixed(1)],
    ['pull MB/s: registry client only', r.image.throughputMBps.registryClientOnly.toFixed(1)],
    ['pull MB/s: skopeo copy', r.image.throughputMBps.skopeoCopy.toFixed(1)],
    ['ratio vs skopeo: PULLING phase', r.image.ratioVsSkopeo.buildPullPhase.toFixed(2)],
    ['ratio vs skopeo: client only', r.image.ratioVsSkopeo.registryClientOnly.toFixed(2)],
    ['load average (1/5/15 min)', r.loadavg.map((x) => x.toFixed(2)).join(' ')],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
}

await main();
