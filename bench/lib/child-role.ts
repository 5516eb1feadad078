import { spawn, type ChildProcess } from 'node:child_process';

/**
 * Starts a bench file again as a child in one of its roles (upstream, proxy, ...) and resolves
 * with what it prints after `READY ` once it serves: each role gets an event loop of its own.
 */
export function startChildRole<T>(file: string, args: string[], o: { env?: Record<string, string>; cpuProfDir?: string } = {}): Promise<{ child: ChildProcess; info: T }> {
  const prof = o.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${o.cpuProfDir}`] : [];
  const child = spawn(process.execPath, [...prof, '--import', 'tsx', file, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...o.env } });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /READY (.*)\n/.exec(out);
      if (m) resolve({ child, info: JSON.parse(m[1]) as T });
    });
    child.once('exit', (code) => reject(new Error(`child ${args.join(' ')} exited with ${code}`)));
  });
}
