/**
 * svc's `time` server, in place of the Python mcp-server-time: the same tools (get_current_time,
 * convert_time), arguments and JSON answers, computed with Intl's IANA time zones.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

interface TimeResult { timezone: string; datetime: string; day_of_week: string; is_dst: boolean }

const pad = (n: number) => String(n).padStart(2, '0');

export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    // Intl's RangeError is the answer: not a zone it knows.
    return false;
  }
}

function checkZone(name: string): void {
  if (!isTimeZone(name)) throw new Error(`Invalid timezone: 'No time zone found with key ${name}'`);
}

/** The zone's offset from UTC at an instant, in minutes. */
function offsetMinutes(zone: string, at: Date): number {
  const name = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' }).formatToParts(at).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /GMT([+-])(\d{1,2}):?(\d{2})?/.exec(name);
  if (!m) return 0;
  return (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3] ?? 0));
}

function wallClock(zone: string, at: Date) {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', weekday: 'long',
  }).formatToParts(at);
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return { year: Number(get('year')), month: Number(get('month')), day: Number(get('day')), hour: Number(get('hour')), minute: Number(get('minute')), second: Number(get('second')), weekday: get('weekday') };
}

function timeResult(zone: string, at: Date): TimeResult {
  const w = wallClock(zone, at);
  const offset = offsetMinutes(zone, at);
  const abs = Math.abs(offset);
  const iso = `${w.year}-${pad(w.month)}-${pad(w.day)}T${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}${offset < 0 ? '-' : '+'}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  // Daylight saving time: ahead of the year's smaller (standard) offset.
  const standard = Math.min(offsetMinutes(zone, new Date(Date.UTC(w.year, 0, 1))), offsetMinutes(zone, new Date(Date.UTC(w.year, 6, 1))));
  return { timezone: zone, datetime: iso, day_of_week: w.weekday, is_dst: offset > standard };
}

export function currentTime(zone: string, now = new Date()): TimeResult {
  checkZone(zone);
  return timeResult(zone, now);
}

/** Python's `f"{h:+.1f}h"`, or for fractional hours `f"{h:+.2f}"` without trailing zeros. */
function hoursDifference(minutes: number): string {
  const hours = minutes / 60;
  const sign = hours < 0 ? '-' : '+';
  const text = Number.isInteger(hours) ? Math.abs(hours).toFixed(1) : Math.abs(hours).toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
  return `${sign}${text}h`;
}

export function convertTime(source: string, time: string, target: string, now = new Date()) {
  checkZone(source);
  checkZone(target);
  const m = /^(\d{1,2}):(\d{1,2})$/.exec(time.trim());
  if (!m || Number(m[1]) > 23 || Number(m[2]) > 59) throw new Error('Invalid time format. Expected HH:MM [24-hour format]');
  const [hour, minute] = [Number(m[1]), Number(m[2])];
  const today = wallClock(source, now);
  const wall = Date.UTC(today.year, today.month - 1, today.day, hour, minute);
  // The instant whose wall clock in `source` is today at hour:minute: two rounds settle the offset.
  let instant = wall - offsetMinutes(source, new Date(wall)) * 60_000;
  instant = wall - offsetMinutes(source, new Date(instant)) * 60_000;
  const back = wallClock(source, new Date(instant));
  if (back.hour !== hour || back.minute !== minute) {
    throw new Error(`Invalid time: ${time} does not exist in ${source} on ${today.year}-${pad(today.month)}-${pad(today.day)} (skipped by a clock change)`);
  }
  const at = new Date(instant);
  return {
    source: timeResult(source, at),
    target: timeResult(target, at),
    time_difference: hoursDifference(offsetMinutes(target, at) - offsetMinutes(source, at)),
  };
}

const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

function run(fn: () => unknown) {
  try {
    return { content: [{ type: 'text' as const, text: JSON.stringify(fn(), null, 2) }] };
  } catch (err) {
    return { content: [{ type: 'text' as const, text: `Error processing mcp-server-time query: ${(err as Error).message}` }], isError: true };
  }
}

export function createTimeServer(localZone: string): McpServer {
  checkZone(localZone);
  const server = new McpServer({ name: 'mcp-time', version: '1.0.0' });
  server.registerTool('get_current_time', {
    description: 'Get current time in a specific timezone',
    inputSchema: { timezone: z.string().describe(`IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use '${localZone}' as local timezone if no timezone provided by the user.`) },
    annotations: READ_ONLY,
  }, ({ timezone }) => run(() => {
    if (!timezone) throw new Error('Missing required argument: timezone');
    return currentTime(timezone);
  }));
  server.registerTool('convert_time', {
    description: 'Convert time between timezones',
    inputSchema: {
      source_timezone: z.string().describe(`Source IANA timezone name (e.g., 'America/New_York', 'Europe/London'). Use '${localZone}' as local timezone if no source timezone provided by the user.`),
      time: z.string().describe('Time to convert in 24-hour format (HH:MM)'),
      target_timezone: z.string().describe(`Target IANA timezone name (e.g., 'Asia/Tokyo', 'America/San_Francisco'). Use '${localZone}' as local timezone if no target timezone provided by the user.`),
    },
    annotations: READ_ONLY,
  }, ({ source_timezone, time, target_timezone }) => run(() => convertTime(source_timezone, time, target_timezone)));
  return server;
}
