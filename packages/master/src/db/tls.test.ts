/**
 * master.database.tls on MySQL/MariaDB (docs/cluster.md, "Traffic between components"): the
 * server's certificate is checked against Node's default trust, which NODE_EXTRA_CA_CERTS
 * extends. Node reads that variable once at start, so each case runs in a process of its own.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const CA = process.env.SVC_TEST_TLS_CA;
const HOST = process.env.SVC_TEST_MYSQL_HOST;
const skip = CA && HOST ? false
  : process.env.SVC_TEST_REQUIRE_ALL_DBS === '1' ? false : 'SVC_TEST_TLS_CA or SVC_TEST_MYSQL_HOST not set (run scripts/test-services.sh start)';
const CONNECT = fileURLToPath(new URL('./connect.ts', import.meta.url));

/** The session's TLS cipher as the server reports it ('' over plain TCP), or the error's message. */
function cipherSeen(o: { tls: boolean; trust?: string; host?: string }): Promise<string> {
  const cfg = {
    driver: 'mysql', host: o.host ?? HOST, port: Number(process.env.SVC_TEST_MYSQL_PORT ?? 3306), user: process.env.SVC_TEST_MYSQL_USER ?? 'root',
    password: process.env.SVC_TEST_MYSQL_PASSWORD ?? '', database: 'mysql', tls: o.tls,
  };
  const script = `
    import { sql } from 'kysely';
    import { openDatabase } from ${JSON.stringify(CONNECT)};
    const db = await openDatabase(${JSON.stringify(cfg)});
    try {
      const r = await sql\`SHOW SESSION STATUS LIKE 'Ssl_cipher'\`.execute(db.kysely);
      console.log('cipher:' + (r.rows[0]?.Value ?? ''));
    } catch (err) { console.log('error:' + err.message); } finally { await db.close(); }`;
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_EXTRA_CA_CERTS: o.trust };
  if (!o.trust) delete env.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve, reject) => execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { env, timeout: 30_000 }, (err, stdout, stderr) => {
    const line = stdout.split('\n').find((l) => l.startsWith('cipher:') || l.startsWith('error:'));
    if (line) resolve(line);
    else reject(new Error(`no answer from the child: ${err?.message ?? ''} ${stderr}`));
  }));
}

test('master.database.tls: MySQL over TLS, the server checked against the CA NODE_EXTRA_CA_CERTS names; refused without it or for another name', { skip }, async () => {
  assert.ok(CA && HOST, 'SVC_TEST_TLS_CA and SVC_TEST_MYSQL_HOST are set by scripts/test-services.sh');
  assert.match(await cipherSeen({ tls: true, trust: CA }), /^cipher:\S+/);
  assert.equal(await cipherSeen({ tls: false }), 'cipher:', 'without tls the session is plain');
  assert.match(await cipherSeen({ tls: true }), /^error:.*(self[- ]signed|unable to (get|verify)|certificate)/i, 'an unknown CA is refused');
  // The certificate names 127.0.0.1 and localhost; another name for the same server is refused.
  assert.match(await cipherSeen({ tls: true, trust: CA, host: '127.1' }), /^error:.*(altnames|does not match)/i);
});
