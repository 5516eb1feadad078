import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { DELIMITER, deserialize, isWireError, newMessage, serialize, sign } from './jupyter-wire.ts';

const key = Buffer.from('a0436f6c-1916-498b-8eb9-e81ab9368e84');

test('a message is signed with HMAC-SHA256 over header, parent header, metadata and content', () => {
  const m = newMessage('execute_request', { code: '1+1' }, 'session-1');
  const parts = serialize(m, key);
  assert.ok(parts[0].equals(DELIMITER));
  const hmac = createHmac('sha256', key);
  for (const p of parts.slice(2)) hmac.update(p);
  assert.equal(parts[1].toString(), hmac.digest('hex'));
  assert.equal(parts.length, 6);
  const header = JSON.parse(parts[2].toString());
  assert.equal(header.msg_type, 'execute_request');
  assert.equal(header.version, '5.3');
  assert.equal(header.session, 'session-1');
});

test('received parts are read past routing ids or a topic, and their signature checked', () => {
  const m = newMessage('stream', { name: 'stdout', text: 'hi' }, 's');
  m.parent_header = { msg_id: 'parent-1' };
  const parts = [Buffer.from('kernel.abc.stream'), ...serialize(m, key)];
  const back = deserialize(parts, key);
  assert.ok(!isWireError(back));
  assert.equal(back.parent_header.msg_id, 'parent-1');
  assert.deepEqual(back.content, { name: 'stdout', text: 'hi' });

  const forged = [...parts];
  forged[5] = Buffer.from(JSON.stringify({ name: 'stdout', text: 'forged' }));
  const refused = deserialize(forged, key);
  assert.ok(isWireError(refused) && refused.code === 'bad_signature');
  const otherKey = deserialize(parts, Buffer.from('other'));
  assert.ok(isWireError(otherKey) && otherKey.code === 'bad_signature');
  const cut = deserialize(parts.slice(0, 4), key);
  assert.ok(isWireError(cut) && cut.code === 'no_delimiter');
});

test('sign is hex HMAC-SHA256 of the parts in order', () => {
  const parts = [Buffer.from('{}'), Buffer.from('{"a":1}')];
  assert.equal(sign(key, parts), createHmac('sha256', key).update('{}').update('{"a":1}').digest('hex'));
});
