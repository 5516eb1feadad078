import type { Logger } from '@svc/common';
import type { Vault } from './vault.ts';

/** One sealed value as stored: its row's id (for the log), the seal, and the context it was sealed with. */
interface SealedValue {
  id: string;
  sealed: string;
  context: string;
}

/** A column of sealed values (vault/sealed-columns.ts): how to read them, and to write one back sealed anew. */
export interface SealedColumn {
  /** What the values are, for the log: "webhook signature secret". */
  what: string;
  list(): Promise<SealedValue[]>;
  /** Stores `next` in place of `value.sealed`, if the row still holds that; false: it changed since (a user's update, another master). */
  replace(value: SealedValue, next: string): Promise<boolean>;
}

export interface ResealReport {
  /** Values now sealed under the primary key, by column. */
  resealed: Record<string, number>;
  /** Values no key of the file opens (logged one by one, left as they are). */
  unopened: number;
}

/**
 * Seals every value of `columns` that is under an older key than the vault's primary anew under
 * the primary (docs/security.md, "The vault key"), so the older key can leave the key file
 * without leaving a value no master can open. A value no key opens is logged with its row's id
 * and left as it is: the key it needs may yet come back to the file. Values are read and
 * written one by one, each compare-and-set, so two masters starting together or a user's update
 * meanwhile lose nothing.
 */
export async function resealStale(vault: Vault, columns: SealedColumn[], logger: Logger): Promise<ResealReport> {
  const report: ResealReport = { resealed: {}, unopened: 0 };
  for (const column of columns) {
    let resealed = 0;
    for (const value of await column.list()) {
      if (!vault.isStale(value.sealed)) continue;
      let plain: string;
      try {
        plain = vault.open(value.sealed, value.context);
      } catch (err) {
        report.unopened++;
        logger.error({ what: column.what, id: value.id, err: (err as Error).message }, 'a sealed value cannot be opened with any key of the vault key file: left as it is (put its key back in the file to recover it)');
        continue;
      }
      if (await column.replace(value, vault.seal(plain, value.context))) resealed++;
    }
    if (resealed) report.resealed[column.what] = resealed;
  }
  if (Object.keys(report.resealed).length) logger.info({ primary: vault.primary, resealed: report.resealed }, 'sealed values under older vault keys sealed anew under the primary key');
  return report;
}
