import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Sandbox } from '@svc/sdk';
import { sdkOpts } from './connection.ts';

test('the connection\'s apiHeaders go with every API call the SDK makes, and only there', async () => {
  const seen: Array<string | undefined> = [];
  const api = http.createServer((req, res) => {
    seen.push(req.headers['x-svc-internal-caller'] as string | undefined);
    res.setHeader('content-type', 'application/json');
    res.end('[]');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  try {
    const apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    const opts = sdkOpts({ apiUrl, sandboxUrl: 'http://127.0.0.1:1', apiHeaders: { 'x-svc-internal-caller': 'mark' } }, 'e2b_key');
    await Sandbox.list(opts).nextItems();
    await Sandbox.list(sdkOpts({ apiUrl, sandboxUrl: 'http://127.0.0.1:1' }, 'e2b_key')).nextItems();
    assert.deepEqual(seen, ['mark', undefined]);
  } finally {
    api.close();
  }
});
