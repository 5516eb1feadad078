import { Sandbox } from 'e2b';
const t0 = performance.now(); const lap = (s: string) => console.log(s, Math.round(performance.now() - t0));
const a = await Sandbox.create('base', { envs: { FROM_ORIGIN: 'yes' } });
await a.files.write('/home/user/before.txt', 'before');
await a.commands.run('pip --version > /home/user/pip.txt 2>&1; sudo rm -f /etc/motd');
lap('origin ready');
const snap = await a.createSnapshot({ name: 'my-snap' });
lap('snapshot ' + JSON.stringify(snap));
await a.files.write('/home/user/after.txt', 'after');
const b = await Sandbox.create(snap.snapshotId);
lap('from snapshot');
console.log('b before:', await b.files.read('/home/user/before.txt'), 'env:', (await b.commands.run('echo $FROM_ORIGIN')).stdout.trim());
console.log('b after exists:', await b.files.exists('/home/user/after.txt'), 'motd exists:', await b.files.exists('/etc/motd'));
const list = []; const p = Sandbox.listSnapshots(); while (p.hasNext) list.push(...await p.nextItems()); console.log('list', JSON.stringify(list));
const forks = await Sandbox.fork(a.sandboxId, { count: 2 }).catch((e) => { console.log('fork err', e); return []; });
lap('fork');
console.log('forks', forks.map((f: any) => f.sandboxId ?? String(f)));
if (forks.length === 2) {
  const [f1, f2] = forks as Sandbox[];
  await f1.files.write('/home/user/f1.txt', 'f1');
  console.log('f2 sees f1:', await f2.files.exists('/home/user/f1.txt'), 'origin sees f1:', await a.files.exists('/home/user/f1.txt'), 'f1 has after:', await f1.files.read('/home/user/after.txt'));
  for (const f of forks as Sandbox[]) await f.kill();
}
console.log('delete:', await Sandbox.deleteSnapshot(snap.snapshotId), 'again:', await Sandbox.deleteSnapshot(snap.snapshotId));
await Sandbox.create(snap.snapshotId).then(() => console.log('create from deleted: unexpectedly ok'), (e) => console.log('create from deleted:', e.constructor.name, e.message));
await a.kill(); await b.kill();
