/** How the console writes sizes, times and durations. */

export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function percent(n: number | undefined): string {
  return n === undefined || !Number.isFinite(n) ? '–' : `${n.toFixed(n < 10 ? 1 : 0)} %`;
}

/*
 * One Intl formatter each, made once: `Date.toLocaleString(undefined, options)` builds a formatter
 * per call, about 0.5 ms each in Chromium, seconds for a table of 1,000 sandboxes.
 */
const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });
const timeFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });

/** A time as the reader's local date and time, to the second. */
export function when(iso: string | number | undefined): string {
  if (iso === undefined || iso === '') return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : dateTimeFormat.format(d);
}

const shortDateFormat = new Intl.DateTimeFormat(undefined, { month: 'numeric', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });

/** Compact, for a table cell: the time of day when it is today, else the day and the minute. */
export function shortWhen(iso: string | number | undefined, now = Date.now()): string {
  if (iso === undefined || iso === '') return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toDateString() === new Date(now).toDateString() ? timeFormat.format(d) : shortDateFormat.format(d);
}

/** The local time of day, 24-hour, to the second (a log line's, a chart's axis). */
export function timeOfDay(t: string | number): string {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : timeFormat.format(d);
}

/** "in 4 min", "12 s ago". */
export function relative(iso: string | number | undefined, now = Date.now()): string {
  if (iso === undefined || iso === '') return '–';
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const s = Math.round((t - now) / 1000);
  const abs = Math.abs(s);
  if (abs === 0) return 'now';
  const text = abs < 60 ? `${abs} s` : abs < 3600 ? `${Math.round(abs / 60)} min` : abs < 86_400 ? `${(abs / 3600).toFixed(1)} h` : `${(abs / 86_400).toFixed(1)} d`;
  return s >= 0 ? `in ${text}` : `${text} ago`;
}

export function metadataText(m: Record<string, string> | undefined): string {
  return m && Object.keys(m).length ? Object.entries(m).map(([k, v]) => `${k}=${v}`).join(', ') : '–';
}
