import { createHash } from 'node:crypto';
import { MAX_LOCK_NAME } from '@svc/common';

/** The per-sandbox lock that serialises pause, resume and kill across replicas. */
export function sandboxLockName(sandboxId: string): string {
  const name = `lc:sbx:${sandboxId}`;
  if (name.length <= MAX_LOCK_NAME) return name;
  return `lc:sbx:${createHash('sha256').update(sandboxId).digest('hex').slice(0, 40)}`;
}
