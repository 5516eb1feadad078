import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import type { Logger } from '@svc/common';
import { isIpv4, plainIpv4 } from './ipv4.ts';

export interface Destination {
  ip: string;
  port: number;
}

const CONNTRACK_PROC = '/proc/net/nf_conntrack';
const CONNTRACK_TIMEOUT_MS = 2_000;

/**
 * Where a DNAT'd connection was going before nftables steered it here, from its conntrack entry:
 * the original tuple's dst and dport. Node has no SO_ORIGINAL_DST, so the kernel's table is read
 * (/proc/net/nf_conntrack, else the conntrack tool). Undefined when neither knows the connection.
 */
export async function conntrackOriginalDestination(socket: Socket, logger: Logger): Promise<Destination | undefined> {
  const ip = plainIpv4(socket.remoteAddress);
  const port = socket.remotePort;
  if (!isIpv4(ip) || port === undefined) return undefined;
  const fromProc = await readProcTable().then(
    (text) => text === undefined ? undefined : findOriginalDestination(text, ip, port),
    (err: unknown) => { logger.warn({ err, path: CONNTRACK_PROC }, 'cannot read the conntrack table'); return undefined; },
  );
  if (fromProc) return fromProc;
  const listed = await runConntrack(ip, port, logger);
  return listed === undefined ? undefined : findOriginalDestination(listed, ip, port);
}

async function readProcTable(): Promise<string | undefined> {
  try {
    return await readFile(CONNTRACK_PROC, 'utf8');
  } catch (err) {
    // No nf_conntrack module or no procfs entry: the conntrack tool is the next try.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function runConntrack(ip: string, port: number, logger: Logger): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('conntrack', ['-L', '-p', 'tcp', '--orig-src', ip, '--sport', String(port)], { timeout: CONNTRACK_TIMEOUT_MS }, (err, stdout) => {
      if (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') logger.warn({ err: err.message, ip, port }, 'conntrack -L failed');
        return resolve(undefined);
      }
      resolve(stdout);
    });
  });
}

/**
 * The original destination of the TCP connection from ip:port in conntrack's text form (the
 * /proc table or `conntrack -L`): the first src/dst/sport/dport on a line are the original tuple.
 */
export function findOriginalDestination(table: string, clientIp: string, clientPort: number): Destination | undefined {
  for (const line of table.split('\n')) {
    if (!/\btcp\b/.test(line)) continue;
    const t = originalTuple(line);
    if (!t || t.src !== clientIp || t.sport !== clientPort) continue;
    if (/\b(TIME_WAIT|CLOSE)\b/.test(line)) continue; // an earlier connection from a reused port
    return { ip: t.dst, port: t.dport };
  }
  return undefined;
}

function originalTuple(line: string): { src: string; dst: string; sport: number; dport: number } | undefined {
  const field = (name: string) => new RegExp(`\\b${name}=(\\S+)`).exec(line)?.[1];
  const src = field('src');
  const dst = field('dst');
  const sport = Number(field('sport'));
  const dport = Number(field('dport'));
  if (!src || !dst || !isIpv4(dst) || !Number.isInteger(sport) || !Number.isInteger(dport)) return undefined;
  return { src, dst, sport, dport };
}
