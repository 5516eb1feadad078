/**
 * The idle connections of an UpstreamPool by group (UpstreamPoolOptions.groupOf; one group
 * without it), each group in parking order (a Set keeps insertion order), so that the pool's caps
 * close the longest parked of a group, and the total's of the group holding the most.
 */
export class IdleGroups<T extends { key: string }> {
  private readonly groups = new Map<string, Set<T>>();
  private count = 0;

  constructor(private readonly groupOf: (key: string) => string) {}

  get size(): number { return this.count; }

  /** Parks an idle connection as its group's newest; returns the group. */
  add(conn: T): ReadonlySet<T> {
    const g = this.groupOf(conn.key);
    let group = this.groups.get(g);
    if (group === undefined) { group = new Set(); this.groups.set(g, group); }
    group.add(conn);
    this.count++;
    return group;
  }

  /** Forgets a connection (reused, closed or evicted); nothing when it is not parked. */
  delete(conn: T): void {
    const g = this.groupOf(conn.key);
    const group = this.groups.get(g);
    if (group === undefined || !group.delete(conn)) return;
    this.count--;
    if (group.size === 0) this.groups.delete(g);
  }

  /** The longest parked of a group. */
  static oldest<T>(group: ReadonlySet<T>): T {
    return group.values().next().value as T;
  }

  /** The group with the most idle connections (a scan: the pool asks only when its total is passed). */
  largest(): ReadonlySet<T> {
    let largest: Set<T> | undefined;
    for (const group of this.groups.values()) if (largest === undefined || group.size > largest.size) largest = group;
    return largest!;
  }

  clear(): void {
    this.groups.clear();
    this.count = 0;
  }
}
