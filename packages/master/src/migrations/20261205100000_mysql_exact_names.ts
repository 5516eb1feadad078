import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261205100000_mysql_exact_names',
  steps: [
    // MySQL's default collations ignore case, SQLite's and PostgreSQL's do not: on MySQL alone a
    // lookup of volume `data` found `Data`, the two could not both be made, a snapshot named
    // `MySnap` was found as `mysnap`, removing tag `DEFAULT` removed `default` (past the service's
    // check for `default`), and a build tagged `Prod` and `prod` was ready while its tags hit a
    // duplicate key and its template was marked failed. utf8mb4_bin compares as the other engines
    // do (trailing spaces aside, which no name or tag may have); the unique keys stay, and rows they allowed before are still distinct. Types and
    // nullability as the columns were made.
    { op: 'mysqlModifyColumn', table: 't_svc_template_tag', column: { name: 'tag', type: 'id', exact: true } },
    { op: 'mysqlModifyColumn', table: 't_svc_volume', column: { name: 'name', type: 'string', exact: true } },
    { op: 'mysqlModifyColumn', table: 't_svc_snapshot', column: { name: 'name', type: 'string', nullable: true, exact: true } },
  ],
};
