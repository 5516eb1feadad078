/**
 * The firewall's connection limit on a real kernel: the table is loaded by nft (a rule the kernel
 * refuses fails here, not on a node), and the limit, as the kernel lists it back, stops a
 * "sandbox's" new connections past it, in network namespaces of the test's own (the rest of the
 * table, which drops a sandbox's connections to its host, is left out there).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { Firewall } from './firewall.ts';

const isRoot = process.getuid?.() === 0;

test('max_connections_per_sandbox: the table loads, and a sandbox\'s new connections past the limit are dropped', { skip: isRoot ? false : 'needs root (nft, network namespaces)' }, async () => {
  const table = `svc_fwlim_${process.pid}`;
  const host = `fwlim-${process.pid}`;
  const sandbox = `${host}-sb`;
  const fw = new Firewall(table, 'svl', '10.251.0.0/24', undefined, async () => {}, 3);
  const sh = (...args: string[]) => execFileSync(args[0]!, args.slice(1), { encoding: 'utf8' });
  let listener: ReturnType<typeof spawn> | undefined;
  try {
    await fw.rebuild([]);
    const listed = sh('nft', 'list', 'table', 'ip', table);
    assert.match(listed, /iifname "svl\*" ct state new add @sandbox_conns \{ ip saddr ct count over 3 \} drop/);
    const set = /\tset sandbox_conns \{[^}]*\}/.exec(listed)![0];
    const chain = /\tchain conn_limit \{[\s\S]*?\n\t\}/.exec(listed)![0];
    sh('ip', 'netns', 'add', host);
    sh('ip', 'netns', 'add', sandbox);
    sh('ip', 'link', 'add', 'svlx0', 'netns', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', sandbox);
    sh('ip', '-n', host, 'addr', 'add', '10.251.0.1/30', 'dev', 'svlx0');
    sh('ip', '-n', host, 'link', 'set', 'svlx0', 'up');
    sh('ip', '-n', sandbox, 'addr', 'add', '10.251.0.2/30', 'dev', 'eth0');
    sh('ip', '-n', sandbox, 'link', 'set', 'eth0', 'up');
    execFileSync('ip', ['netns', 'exec', host, 'nft', '-f', '-'], { input: `table ip limits {\n${set}\n${chain}\n}\n` });
    listener = spawn('ip', ['netns', 'exec', host, 'python3', '-c', 'import socket,time\ns=socket.socket()\ns.bind(("10.251.0.1",7000))\ns.listen(50)\nprint("up",flush=True)\ntime.sleep(30)'], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => listener!.stdout!.once('data', () => resolve()));
    const out = sh('ip', 'netns', 'exec', sandbox, 'python3', '-c', [
      'import socket', 'held=[]', 'ok=0',
      'for i in range(4):',
      '  c=socket.socket(); c.settimeout(1)',
      '  try:', '    c.connect(("10.251.0.1",7000)); ok+=1; held.append(c)',
      '  except OSError: pass',
      'print(ok)',
    ].join('\n'));
    assert.equal(out.trim(), '3', 'three connections held, the fourth dropped');
  } finally {
    listener?.kill();
    await fw.drop();
    for (const n of [host, sandbox]) {
      try {
        execFileSync('ip', ['netns', 'del', n], { stdio: 'ignore' });
      } catch (err) {
        // Not made: the test failed before it; nothing to remove.
        if (!/Command failed/.test(String(err))) throw err;
      }
    }
  }
});
