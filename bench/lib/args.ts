/** The benchmarks' command lines: `--name value` flags, and a child role given as `--serve-<role>`. */

/** A number flag (`--runs 200`), or `d` when it is absent. */
export function numberArg(name: string, d: number, argv: string[] = process.argv): number {
  const i = argv.indexOf(`--${name}`);
  return i > 0 ? Number(argv[i + 1]) : d;
}

/** A string flag (`--qemu /path`), or `d` when it is absent. */
export function stringArg(name: string, d: string, argv: string[] = process.argv): string {
  const i = argv.indexOf(`--${name}`);
  return i > 0 && argv[i + 1] !== undefined ? argv[i + 1]! : d;
}

/** Every `--name value` pair, and the role of a child process (`--serve-upstream` → `upstream`). */
export function readFlags(argv: string[], roles: readonly string[]): { mode?: string; rest: Record<string, string>; num(k: string, d: number): number } {
  const rest: Record<string, string> = {};
  let mode: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const role = a.startsWith('--serve-') ? a.slice('--serve-'.length) : undefined;
    if (role !== undefined && roles.includes(role)) { mode = role; continue; }
    if (!a.startsWith('--')) continue;
    rest[a.slice(2)] = argv[i + 1] ?? '';
    i++;
  }
  return { mode, rest, num: (k, d) => (rest[k] === undefined ? d : Number(rest[k])) };
}
