/** True when a database error is a unique-key violation, on SQLite, PostgreSQL or MySQL/MariaDB. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  if (!e) return false;
  return e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
    || e.code === '23505'
    || e.code === 'ER_DUP_ENTRY' || e.errno === 1062;
}
