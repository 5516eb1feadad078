/**
 * What commands print: with `--json` one JSON document on stdout, otherwise tables and
 * `key: value` lines meant for people.
 */
export type Cell = string | number | boolean | Date | null | undefined;

export interface Column<T> {
  header: string;
  value: (row: T) => Cell;
  /** The least width in a streamed table, whose later rows' cells are not known when the header is printed. */
  width?: number;
}

export class Output {
  constructor(
    readonly json: boolean,
    private readonly stdout: NodeJS.WritableStream = process.stdout,
  ) {}

  /** Prints `data` as JSON, or calls `human` to print it for people. */
  result(data: unknown, human: () => void): void {
    if (this.json) this.line(JSON.stringify(data, null, 2));
    else human();
  }

  line(text = ''): void {
    this.stdout.write(`${text}\n`);
  }

  table<T>(rows: T[], columns: Column<T>[], empty = '(none)'): void {
    if (rows.length === 0) {
      this.line(empty);
      return;
    }
    const cells = rows.map((r) => columns.map((c) => formatCell(c.value(r))));
    const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i].length)));
    const render = (row: string[]) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd();
    this.line(render(columns.map((c) => c.header)));
    for (const row of cells) this.line(render(row));
  }

  /**
   * A table printed a row at a time, for rows that keep coming: the header now, each column as wide
   * as its header and its `width`, widened by a longer cell (the rows above stay as printed).
   */
  streamTable<T>(columns: Column<T>[]): (row: T) => void {
    const widths = columns.map((c) => Math.max(c.header.length, c.width ?? 0));
    const render = (row: string[]) => row.map((cell, i) => {
      widths[i] = Math.max(widths[i], cell.length);
      return i === row.length - 1 ? cell : cell.padEnd(widths[i]);
    }).join('  ').trimEnd();
    this.line(render(columns.map((c) => c.header)));
    return (row) => this.line(render(columns.map((c) => formatCell(c.value(row)))));
  }

  /** Aligned `key: value` lines; undefined values are left out. */
  fields(pairs: [string, Cell][]): void {
    const shown = pairs.filter(([, v]) => v !== undefined);
    const width = Math.max(0, ...shown.map(([k]) => k.length));
    for (const [k, v] of shown) this.line(`${`${k}:`.padEnd(width + 1)} ${formatCell(v)}`);
  }
}

function formatCell(v: Cell): string {
  if (v === undefined || v === null || v === '') return '-';
  if (v instanceof Date) return v.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return String(v);
}

export function formatPairs(map: Record<string, string> | undefined): string {
  const entries = Object.entries(map ?? {});
  return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(',') : '-';
}

export function formatBytes(n: number | undefined): string {
  if (n === undefined) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}
