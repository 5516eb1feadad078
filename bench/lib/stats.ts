/** Small helpers shared by the benchmarks: percentiles, timing, memory, result files. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface Stat { n: number; p50: number; p95: number; p99: number; min: number; max: number }

export function stat(samples: number[]): Stat {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  const r = (v: number) => Math.round(v * 100) / 100;
  return { n: s.length, p50: r(at(0.5)), p95: r(at(0.95)), p99: r(at(0.99)), min: r(s[0]), max: r(s[s.length - 1]) };
}

export async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now();
  const v = await fn();
  return [performance.now() - t, v];
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** MemTotal - MemAvailable, in MB. */
export function usedMemoryMB(meminfo: string): number {
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(meminfo)![1]);
  return (kb('MemTotal') - kb('MemAvailable')) / 1024;
}

export function ratio(a: number, b: number): number {
  return Math.round((a / b) * 100) / 100;
}

export function writeResult(name: string, data: unknown): string {
  const file = join(BENCH_ROOT, 'results', `${name}.json`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}

export function printTable(title: string, rows: Record<string, Stat>): void {
  const pad = (s: string | number, n: number) => String(s).padEnd(n);
  console.log(`\n${title}`);
  console.log(pad('measure', 50) + pad('n', 5) + pad('p50', 10) + pad('p95', 10) + pad('p99', 10) + pad('min', 10) + 'max');
  for (const [k, v] of Object.entries(rows)) {
    console.log(pad(k, 50) + pad(v.n, 5) + pad(v.p50, 10) + pad(v.p95, 10) + pad(v.p99, 10) + pad(v.min, 10) + v.max);
  }
}
