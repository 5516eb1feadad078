/**
 * Issue 34's figures for lifecycle events and webhooks (docs/observability.md):
 * - how long after a change its event reaches a webhook on loopback (goal: p50 ≤ 100 ms), from
 *   the event's own timestamp to the receiver, while sandboxes are created and killed;
 * - what recording an event adds to a create (goal: ≤ 1 ms at p50): the recorder's own time, which
 *   a create awaits, with no webhook and with one subscribed, beside the create it is part of;
 * - the database's growth per event.
 * A real master (SQLite, as `svc up` runs it) over the fake node agent, whose creates cost
 * nothing, so what is measured is the master's own work.
 *
 *   node --import tsx bench/events.ts [--runs 300]
 * Prints a table and writes bench/results/events.json.
 */
import { statSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { MasterClient } from '@svc/contracts/master';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { numberArg } from './lib/args.ts';
import { printTable, stat, timed, writeResult } from './lib/stats.ts';

const RUNS = numberArg('runs', 300);
const EVENTS_FOR_SIZE = 5_000;

const newSandbox = {
  template: 'base', timeout: 300, onTimeout: 'kill', autoResume: false, metadata: { bench: 'events' }, envVars: {}, secure: true,
  network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
} as const;

async function main() {
  const arrivals: number[] = [];
  const receiver = http.createServer((q, s) => {
    let body = '';
    q.on('data', (c) => { body += c; });
    q.on('end', () => {
      const at = Date.now();
      arrivals.push(at - Date.parse((JSON.parse(body) as { timestamp: string }).timestamp));
      s.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const h = await startMasterOverFakeNode();
  const master = new MasterClient(h.master.url);
  try {
    // Creates and kills with no webhook: the recorder alone.
    const recordNone: number[] = [];
    const createNone: number[] = [];
    const rec = h.master.events.recorder;
    const timedRecorder = (into: number[]) => {
      const original = rec.record.bind(rec);
      rec.record = async (...args) => {
        const [ms] = await timed(() => original(...args));
        // A create's own: the kills' events are recorded on another call.
        if (args[1] === 'sandbox.lifecycle.created') into.push(ms);
      };
      return () => { rec.record = original; };
    };
    let restore = timedRecorder(recordNone);
    for (let i = 0; i < RUNS; i++) {
      const [ms, sb] = await timed(() => master.createSandbox(newSandbox as never));
      createNone.push(ms);
      await master.killSandbox(sb.sandboxId);
    }
    restore();

    // The same with a webhook subscribed to every type: the event's deliveries are queued with it.
    const hook = await fetch(`${h.master.url}/events/webhooks`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/`, events: ['sandbox.lifecycle.created', 'sandbox.lifecycle.killed'], signatureSecret: 'bench' }),
    });
    if (hook.status !== 201) throw new Error(`webhook not created: ${hook.status} ${await hook.text()}`);
    const recordHook: number[] = [];
    const createHook: number[] = [];
    restore = timedRecorder(recordHook);
    for (let i = 0; i < RUNS; i++) {
      const [ms, sb] = await timed(() => master.createSandbox(newSandbox as never));
      createHook.push(ms);
      await master.killSandbox(sb.sandboxId);
      // One change at a time: the figure is a delivery's latency, not a queue's under a burst.
      await new Promise((r) => setTimeout(r, 20));
    }
    restore();
    const deadline = Date.now() + 10_000;
    while (arrivals.length < RUNS * 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));

    // Growth: the database file before and after many events (SQLite, its pages as written).
    const dbFile = join(h.cfg.data_dir, 'm.sqlite');
    const before = statSync(dbFile).size;
    const subject = { sandbox_id: 'bench-size', team_id: '00000000-0000-4000-8000-000000000001', template_id: 'tpl-base', cpu_count: 2, memory_mb: 512, metadata: '{"bench":"events"}', started_at: Date.now() };
    await fetch(`${h.master.url}/events/webhooks/${(await hook.json() as { id: string }).id}`, { method: 'DELETE' });
    for (let i = 0; i < EVENTS_FOR_SIZE; i++) await rec.record({ ...subject, sandbox_id: `bench-size-${i % 500}` } as never, i % 2 ? 'sandbox.lifecycle.paused' : 'sandbox.lifecycle.resumed');
    const bytesPerEvent = Math.round((statSync(dbFile).size - before) / EVENTS_FOR_SIZE);

    const rows = {
      'webhook delivery after the change (ms)': stat(arrivals),
      'created event recorded, no webhook (ms)': stat(recordNone),
      'created event recorded, one webhook queued (ms)': stat(recordHook),
      'create through the master, fake node (ms)': stat(createNone),
      'the same, one webhook subscribed (ms)': stat(createHook),
    };
    printTable(`Lifecycle events and webhooks (${RUNS} creates and kills each way; SQLite)`, rows);
    console.log(`\ndeliveries: ${arrivals.length} of ${RUNS * 2}; database growth: ${bytesPerEvent} bytes per event (${EVENTS_FOR_SIZE} events)`);
    const file = writeResult('events', {
      runs: RUNS, latency: rows, deliveries: arrivals.length, expectedDeliveries: RUNS * 2, bytesPerEvent,
      goals: { deliveryP50Ms: 100, recordP50Ms: 1 },
      met: { delivery: rows['webhook delivery after the change (ms)'].p50 <= 100, record: rows['created event recorded, one webhook queued (ms)'].p50 <= 1 },
    });
    console.log(`wrote ${file}`);
  } finally {
    await h.close();
    receiver.close();
  }
}

main().catch((err) => { console.error(err); process.exit(1); });
