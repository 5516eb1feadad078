import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { WatchDirResponseSchema } from '@svc/contracts/envd/filesystem/filesystem_pb';
import { jsonCodec } from './codec.ts';
import { ResponseStream } from './response-stream.ts';

test('writes to a client that does not read share one drain promise: no listener per write', async () => {
  const responses: ServerResponse[] = [];
  const server = createServer((_req, res) => void responses.push(res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
  try {
    client.pause(); // a client that never reads
    client.write('POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
    while (responses.length === 0) await new Promise((r) => setTimeout(r, 5));
    const res = responses[0]!;
    const stream = new ResponseStream(res, jsonCodec, WatchDirResponseSchema, 'application/connect+json');
    const before = { drain: res.listenerCount('drain'), close: res.listenerCount('close') };
    const name = 'x'.repeat(1024);
    const waits = new Set<Promise<void>>();
    for (let i = 0; i < 20_000; i++) {
      const wait = stream.send({ event: { case: 'filesystem', value: { name, type: 1 } } });
      if (wait) waits.add(wait);
    }
    assert.equal(waits.size, 1, 'every write while the socket is full got the same promise');
    assert.equal(res.listenerCount('drain'), before.drain + 1);
    assert.equal(res.listenerCount('close'), before.close + 1);

    client.resume();
    await [...waits][0];
    assert.equal(res.listenerCount('drain'), before.drain, 'the listeners go once the socket drained');
    assert.equal(res.listenerCount('close'), before.close);
  } finally {
    client.destroy();
    server.close();
  }
});
