import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecInput } from '@svc/contracts/node-agent';
import { downloadVerified, type MasterDownloads } from './verified-download.ts';

/**
 * The standard input of an exec (a build's context files): downloaded through the master into a
 * scratch file, checked against its sha256 and size, and removed once the command has run.
 */
export class ExecInputs {
  constructor(private readonly dir: string, private readonly master?: MasterDownloads) {}

  async with<T>(input: ExecInput, run: (file: string) => Promise<T>): Promise<T> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const file = join(this.dir, `stdin-${randomBytes(6).toString('hex')}`);
    try {
      await downloadVerified('exec input', input.url, this.master, file, input);
      return await run(file);
    } finally {
      await rm(file, { force: true });
    }
  }
}
