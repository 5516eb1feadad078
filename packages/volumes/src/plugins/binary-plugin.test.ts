import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_HOOK_TIMEOUT_MS, VOLUME_NAMESPACE } from '@svc/contracts/volumes';
import { livingInGroup, removeTempDir, tempDir } from '../testing/host.ts';
import { BinaryVolumePlugin } from './binary-plugin.ts';
import { VolumePluginError } from './errors.ts';

describe('binary volume plugin', () => {
  let dir: string;
  const base = '/srv/volumes';

  /** Writes an executable shell script plugin and answers its client. */
  const plugin = (name: string, body: string, timeoutMs?: number) => {
    const file = join(dir, name);
    writeFileSync(file, `#!/bin/sh\n${body}\n`);
    chmodSync(file, 0o755);
    return new BinaryVolumePlugin({ name, type: 'binary', binary_path: file, timeout_ms: timeoutMs });
  };
  /** The arguments the echo plugin received for an op. */
  const argsOf = (op: string) => readFileSync(join(dir, `args-${op}`), 'utf8').split('\0').slice(0, -1);

  const attachInput = { sandboxId: 'sb1', namespace: VOLUME_NAMESPACE, volumeId: 'vol-1', refCount: 0, volumeBaseDir: base, privateData: '' };
  const detachInput = { sandboxId: 'sb1', namespace: VOLUME_NAMESPACE, volumeId: 'vol-1', refCount: 0, metadata: {} };

  const rejectsWith = async (p: Promise<unknown>, driver: string, op: string, pattern: RegExp) => {
    const err = await p.then(
      () => assert.fail('the hook succeeded'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof VolumePluginError, `a VolumePluginError, not ${String(err)}`);
    assert.equal(err.driver, driver);
    assert.equal(err.op, op);
    assert.ok(err.message.startsWith(`volume plugin ${driver}: ${op} failed: `), err.message);
    assert.match(err.message, pattern);
  };

  before(() => {
    dir = tempDir('binary');
  });
  after(() => removeTempDir(dir));

  describe('a plugin that keeps the protocol', () => {
    let echo: BinaryVolumePlugin;
    before(() => {
      // records its argv (NUL-separated) and answers each op
      echo = plugin(
        'echo',
        `printf '%s\\0' "$@" > "${dir}/args-$2"
case "$2" in
  create) echo '{"token":"tok-0123456789abcdefghij","private_data":"pd é"}' ;;
  attach) echo '{"host_path":"${base}/echo-vol-1","metadata":{"mount":"m1","opts":"a=b"}}' ;;
  destroy) ;;
  detach) echo '{}' ;;
esac`,
      );
    });

    it('create passes --op, --volume-id and --name, and answers token and private_data', async () => {
      assert.deepEqual(await echo.create({ volumeId: 'vol-1', name: '-starts-with-dash' }), { token: 'tok-0123456789abcdefghij', privateData: 'pd é' });
      assert.deepEqual(argsOf('create'), ['--op', 'create', '--volume-id', 'vol-1', '--name', '-starts-with-dash']);
    });

    it('attach passes the refcount before it and the base dir, and omits --private-data when it is empty', async () => {
      assert.deepEqual(await echo.attach(attachInput), { hostPath: `${base}/echo-vol-1`, metadata: { mount: 'm1', opts: 'a=b' } });
      assert.deepEqual(argsOf('attach'), [
        '--op', 'attach', '--volume-id', 'vol-1', '--sandbox-id', 'sb1', '--namespace', 'svc', '--ref-count', '0', '--volume-base-dir', base,
      ]);
      await echo.attach({ ...attachInput, refCount: 2, privateData: 'export=/a b' });
      assert.deepEqual(argsOf('attach').slice(-4), ['--volume-base-dir', base, '--private-data', 'export=/a b']);
      assert.deepEqual(argsOf('attach').slice(8, 10), ['--ref-count', '2']);
    });

    it('detach passes the metadata attach answered as one JSON argument; empty stdout and {} are success', async () => {
      const metadata = { mount: 'm1', quote: 'say "hi"' };
      await echo.detach({ ...detachInput, refCount: 1, metadata });
      const args = argsOf('detach');
      assert.deepEqual(args.slice(0, 10), ['--op', 'detach', '--volume-id', 'vol-1', '--sandbox-id', 'sb1', '--namespace', 'svc', '--ref-count', '1']);
      assert.equal(args[10], '--metadata');
      assert.deepEqual(JSON.parse(args[11]), metadata);
      assert.equal(args.length, 12);
      await echo.destroy({ volumeId: 'vol-1' });
      assert.deepEqual(argsOf('destroy'), ['--op', 'destroy', '--volume-id', 'vol-1']);
    });

    it('takes the default timeout when the entry names none', () => {
      assert.equal(echo.timeoutMs, DEFAULT_HOOK_TIMEOUT_MS);
      assert.equal(echo.type, 'binary');
    });
  });

  it('a non-zero exit fails with its code and the tail of stderr', async () => {
    const p = plugin('exit3', 'echo "starting" >&2; echo "the disk is on fire" >&2; exit 3');
    await rejectsWith(p.attach(attachInput), 'exit3', 'attach', /: exit code 3: starting\nthe disk is on fire$/);
  });

  it('a non-zero exit with an error answer quotes the error', async () => {
    const p = plugin('exit1', 'echo \'{"error":"no such export"}\'; echo noise >&2; exit 1');
    await rejectsWith(p.create({ volumeId: 'v', name: 'n' }), 'exit1', 'create', /: exit code 1: no such export$/);
  });

  it('stdout that is not JSON fails and quotes its start', async () => {
    const p = plugin('garbage', 'echo "hello, this is not json"');
    await rejectsWith(p.detach(detachInput), 'garbage', 'detach', /printed no JSON: hello, this is not json$/);
    const long = plugin('garbage-long', 'head -c 5000 /dev/zero | tr "\\0" x');
    await rejectsWith(long.destroy({ volumeId: 'v' }), 'garbage-long', 'destroy', /printed no JSON: x{200}…$/);
    const array = plugin('array', 'echo \'["host_path"]\'');
    await rejectsWith(array.attach(attachInput), 'array', 'attach', /printed JSON that is not an object/);
  });

  it('an error answer with exit 0 fails with the error', async () => {
    const p = plugin('boom', 'echo \'{"error":"boom"}\'');
    await rejectsWith(p.destroy({ volumeId: 'v' }), 'boom', 'destroy', /destroy failed: boom$/);
    const typed = plugin('error-number', 'echo \'{"error":42}\'');
    await rejectsWith(typed.destroy({ volumeId: 'v' }), 'error-number', 'destroy', /an error of type number/);
  });

  it('a plugin that does not answer in time is killed with its whole process group', async () => {
    const p = plugin('sleeper', `echo $$ > "${dir}/sleeper.pid"\nsleep 1000 &\nwait`, 300);
    const started = Date.now();
    await rejectsWith(p.attach(attachInput), 'sleeper', 'attach', /did not answer within 300 ms$/);
    const took = Date.now() - started;
    assert.ok(took >= 290 && took < 1_500, `failed after ${took} ms`);
    const pgid = Number(readFileSync(join(dir, 'sleeper.pid'), 'utf8'));
    assert.ok(pgid > 0);
    for (let i = 0; i < 50 && livingInGroup(pgid).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(livingInGroup(pgid), [], 'neither the plugin nor the sleep it started is left');
  });

  it('a signal ends the hook with a failure', async () => {
    const p = plugin('killed', 'echo dying >&2; kill -TERM $$');
    await rejectsWith(p.detach(detachInput), 'killed', 'detach', /killed by SIGTERM: dying$/);
  });

  it('answers beyond the limits fail: private_data over 1024 bytes, oversized token, stdout over 64 KiB', async () => {
    const big = plugin('big-private', `printf '{"private_data":"%s"}' "$(head -c 1025 /dev/zero | tr '\\0' x)"`);
    await rejectsWith(big.create({ volumeId: 'v', name: 'n' }), 'big-private', 'create', /private_data of 1025 bytes; at most 1024/);
    const multibyte = plugin('wide-private', `printf '{"private_data":"%s"}' "$(head -c 513 /dev/zero | tr '\\0' x | sed 's/x/é/g')"`);
    await rejectsWith(multibyte.create({ volumeId: 'v', name: 'n' }), 'wide-private', 'create', /private_data of 1026 bytes/);
    const fits = plugin('fits', `printf '{"private_data":"%s"}' "$(head -c 1024 /dev/zero | tr '\\0' x)"`);
    assert.equal((await fits.create({ volumeId: 'v', name: 'n' })).privateData.length, 1024);
    const token = plugin('big-token', `printf '{"token":"%s"}' "$(head -c 1025 /dev/zero | tr '\\0' t)"`);
    await rejectsWith(token.create({ volumeId: 'v', name: 'n' }), 'big-token', 'create', /a token of 1025 characters/);
    const flood = plugin('flood', 'head -c 70000 /dev/zero | tr "\\0" a');
    await rejectsWith(flood.destroy({ volumeId: 'v' }), 'flood', 'destroy', /more than 65536 bytes on stdout/);
    const badType = plugin('token-type', 'echo \'{"token":7}\'');
    await rejectsWith(badType.create({ volumeId: 'v', name: 'n' }), 'token-type', 'create', /token of type number/);
  });

  it('a token shorter than 22 characters fails the create, said in words an API caller may read; none at all is no token', async () => {
    const short = plugin('short-token', 'echo \'{"token":"0123456789abcdefghij1"}\'');
    const err = await short.create({ volumeId: 'v', name: 'n' }).then(() => assert.fail('a 21-character token was taken'), (e: VolumePluginError) => e);
    assert.ok(err instanceof VolumePluginError);
    assert.match(err.message, /^volume plugin short-token: create failed: answered a token of 21 characters; .* at least 22/);
    assert.equal(err.forCaller, err.message.replace('volume plugin short-token: create failed: ', ''), 'the reason quotes nothing the plugin said');
    const enough = plugin('enough-token', 'echo \'{"token":"0123456789abcdefghij12"}\'');
    assert.equal((await enough.create({ volumeId: 'v', name: 'n' })).token, '0123456789abcdefghij12');
    const none = plugin('no-token', 'echo \'{}\'');
    assert.equal((await none.create({ volumeId: 'v', name: 'n' })).token, '');
  });

  it('attach needs an absolute host_path and metadata of strings (the node agent checks the base dir)', async () => {
    const cases: [string, RegExp][] = [
      ['{}', /answered no host_path/],
      ['', /printed nothing on stdout/],
      ['{"host_path":"relative/dir"}', /not absolute/],
      [`{"host_path":"${base}/v","metadata":{"n":1}}`, /metadata "n" of type number/],
      [`{"host_path":"${base}/v","metadata":["a"]}`, /metadata that is not an object/],
    ];
    for (const [i, [answer, pattern]] of cases.entries()) {
      const p = plugin(`attach-${i}`, answer === '' ? 'true' : `echo '${answer}'`);
      await rejectsWith(p.attach(attachInput), `attach-${i}`, 'attach', pattern);
    }
    const many = JSON.stringify({ host_path: `${base}/v`, metadata: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) });
    await rejectsWith(plugin('many', `echo '${many}'`).attach(attachInput), 'many', 'attach', /metadata of 65 entries; at most 64/);
    const wide = JSON.stringify({ host_path: `${base}/v`, metadata: { a: 'x'.repeat(9000) } });
    await rejectsWith(plugin('wide', `echo '${wide}'`).attach(attachInput), 'wide', 'attach', /metadata of \d+ bytes as JSON; at most 8192/);
    const nulls = plugin('nulls', `echo '{"host_path":"${base}/v","metadata":null,"error":null,"extra":1}'`);
    assert.deepEqual(await nulls.attach(attachInput), { hostPath: `${base}/v`, metadata: {} });
  });

  it('a plugin that cannot be run fails with the reason', async () => {
    const missing = new BinaryVolumePlugin({ name: 'missing', type: 'binary', binary_path: join(dir, 'no-such-plugin') });
    await rejectsWith(missing.create({ volumeId: 'v', name: 'n' }), 'missing', 'create', /cannot run .*no-such-plugin: ENOENT$/);
    const file = join(dir, 'not-executable');
    writeFileSync(file, '#!/bin/sh\necho {}\n');
    chmodSync(file, 0o644);
    const denied = new BinaryVolumePlugin({ name: 'denied', type: 'binary', binary_path: file });
    await rejectsWith(denied.destroy({ volumeId: 'v' }), 'denied', 'destroy', /cannot run .*not-executable: EACCES$/);
  });

  it('an argument the system cannot pass fails the hook instead of throwing elsewhere', async () => {
    const p = plugin('nul', 'echo {}');
    await rejectsWith(p.attach({ ...attachInput, privateData: 'a\0b' }), 'nul', 'attach', /cannot run .*nul: .*null bytes/);
  });

  it('an entry without binary_path is refused', () => {
    assert.throws(() => new BinaryVolumePlugin({ name: 'x', type: 'binary' }), /binary_path is required/);
  });
});
