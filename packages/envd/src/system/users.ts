import { readFileSync, statSync } from 'node:fs';

export interface User {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

interface Group {
  name: string;
  gid: number;
  members: string[];
}

/** A parsed colon-separated database file (/etc/passwd, /etc/group), re-read when it changes. */
class DbFile<T> {
  private cache: { mtimeMs: number; size: number; rows: T[] } | undefined;

  constructor(
    private readonly path: string,
    private readonly parseRow: (fields: string[]) => T | undefined,
  ) {}

  rows(): T[] {
    let stat;
    try {
      stat = statSync(this.path);
    } catch {
      return [];
    }
    if (this.cache && this.cache.mtimeMs === stat.mtimeMs && this.cache.size === stat.size) return this.cache.rows;
    const rows: T[] = [];
    for (const line of readFileSync(this.path, 'utf8').split('\n')) {
      if (!line || line.startsWith('#')) continue;
      const row = this.parseRow(line.split(':'));
      if (row) rows.push(row);
    }
    this.cache = { mtimeMs: stat.mtimeMs, size: stat.size, rows };
    return rows;
  }
}

/** Users and groups of the sandbox, read from its /etc files (no NSS: sandboxes use local files). */
export class UserDatabase {
  private readonly passwd: DbFile<User>;
  private readonly group: DbFile<Group>;

  constructor(etcDir = '/etc') {
    this.passwd = new DbFile(`${etcDir}/passwd`, (f) => {
      const uid = Number(f[2]);
      const gid = Number(f[3]);
      if (f.length < 7 || !f[0] || !Number.isInteger(uid) || !Number.isInteger(gid)) return undefined;
      return { name: f[0], uid, gid, home: f[5] || '/', shell: f[6] || '/bin/sh' };
    });
    this.group = new DbFile(`${etcDir}/group`, (f) => {
      const gid = Number(f[2]);
      if (f.length < 3 || !f[0] || !Number.isInteger(gid)) return undefined;
      return { name: f[0], gid, members: (f[3] ?? '').split(',').filter(Boolean) };
    });
  }

  byName(name: string): User | undefined {
    return this.passwd.rows().find((u) => u.name === name);
  }

  nameOfUid(uid: number): string | undefined {
    return this.passwd.rows().find((u) => u.uid === uid)?.name;
  }

  nameOfGid(gid: number): string | undefined {
    return this.group.rows().find((g) => g.gid === gid)?.name;
  }

  /** Primary group first, then every group that lists the user as a member. */
  groupIds(user: User): number[] {
    const ids = [user.gid];
    for (const g of this.group.rows()) {
      if (g.members.includes(user.name) && !ids.includes(g.gid)) ids.push(g.gid);
    }
    return ids;
  }
}
