import { run } from '../../host/exec.ts';

/** What the driver asks of the QEMU it runs (node_agent.qemu_binary), read once at the agent's start. */
export interface QemuFeatures {
  /** `QEMU emulator version X.Y.Z` as the binary prints it: part of every saved guest's key (template-snapshots.ts). */
  version: string;
  /**
   * memory-backend-file's `rom` option (QEMU 8.2 and later): with `readonly=on,rom=off` a clone
   * opens its template's memory file read-only and still writes its own copy-on-write pages
   * (template-memory.ts), so nothing a clone's QEMU does can reach the file. QEMU 7.2 opens it
   * for writing, and only the mode and the seal stand between a clone and the file.
   */
  fileRomOption: boolean;
}

export async function qemuFeatures(qemu: string): Promise<QemuFeatures> {
  const [version, help] = await Promise.all([
    run(qemu, ['--version'], { timeoutMs: 10_000 }),
    run(qemu, ['-object', 'memory-backend-file,help'], { timeoutMs: 10_000, allowFail: true }),
  ]);
  const line = version.stdout.split('\n')[0]?.trim() ?? '';
  if (!/^QEMU emulator version \d/.test(line)) throw new Error(`${qemu} --version printed ${JSON.stringify(line)}, not QEMU's version`);
  return { version: line, fileRomOption: /^\s*rom=/m.test(help.stdout + help.stderr) };
}
