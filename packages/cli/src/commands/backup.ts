/** `svc backup <dir>`: a consistent copy of what an embedded install keeps, taken while it runs; `svc restore <dir>` puts it back. */
import { Command } from 'commander';
import { loadConfig } from '@svc/common';
import { contextOf } from '../context.ts';
import { formatBytes } from '../output.ts';

export function backupCommand(): Command {
  return new Command('backup')
    .argument('<dir>', 'a new or empty directory, outside the data directory')
    .description('copy the database (SQLite, consistently, while svc runs), the generated keys, the CAs and the configuration into <dir>, in the data directory\'s layout (docs/configuration.md, "Backing up an embedded install")')
    .option('--config <file>', 'the configuration file svc up runs with (also copied)')
    .option('--vault-key-to <dir>', 'also copy the vault\'s key, into this directory apart from <dir> (the key and the database together are the vault\'s secrets in the clear)')
    .option('--artifacts', 'also copy the artifacts: templates\' file systems, snapshots and pause packages (large)')
    .option('--volumes', 'also copy the local volume plugin\'s data (users\' files)')
    .action(async (dir: string, flags: { config?: string; vaultKeyTo?: string; artifacts?: boolean; volumes?: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const cfg = loadConfig({ file: flags.config, overrides: ctx.globals.dataDir ? { data_dir: ctx.globals.dataDir } : {}, validate: false });
      // Loaded on demand: the database's module is native, and other commands start without it.
      const { backup } = await import('../backup.ts');
      const manifest = await backup({ cfg, dest: dir, vaultKeyTo: flags.vaultKeyTo, artifacts: flags.artifacts, volumes: flags.volumes, configFile: flags.config });
      ctx.out.result(manifest, () => {
        ctx.out.table(manifest.items, [
          { header: 'WHAT', value: (i) => i.what },
          { header: 'FROM', value: (i) => i.from },
          { header: 'SIZE', value: (i) => formatBytes(i.bytes) },
        ]);
        ctx.out.line();
        ctx.out.line('not in this backup:');
        for (const n of manifest.notIncluded) ctx.out.line(`  - ${n}`);
      });
    });
}

export function restoreCommand(): Command {
  return new Command('restore')
    .argument('<dir>', 'a backup made by svc backup')
    .description('put a backup of svc backup back into the data directory, with svc stopped; refuses to write over anything (--force moves it aside into <data_dir>/before-restore-<time>/)')
    .option('--config <file>', 'the configuration file svc up runs with: where its paths point')
    .option('--vault-key-from <dir>', 'the directory svc backup\'s --vault-key-to wrote: the vault\'s key')
    .option('--force', 'move what is in the way aside instead of refusing')
    .action(async (dir: string, flags: { config?: string; vaultKeyFrom?: string; force?: boolean }, c: Command) => {
      const ctx = contextOf(c);
      const cfg = loadConfig({ file: flags.config, overrides: ctx.globals.dataDir ? { data_dir: ctx.globals.dataDir } : {}, validate: false });
      const { restore } = await import('../restore.ts');
      const result = await restore({ cfg, from: dir, vaultKeyFrom: flags.vaultKeyFrom, force: flags.force });
      ctx.out.result(result, () => {
        ctx.out.table(result.restored, [{ header: 'WHAT', value: (r) => r.what }, { header: 'TO', value: (r) => r.to }]);
        if (result.movedAside) ctx.out.line(`what was in the way is in ${result.movedAside}`);
        if (result.notRestored.length) {
          ctx.out.line();
          ctx.out.line('not restored:');
          for (const n of result.notRestored) ctx.out.line(`  - ${n}`);
        }
      });
    });
}
