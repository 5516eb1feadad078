import { Sandbox } from '@svc/sdk';

/** `svc up --demo`: the platform's main job once, start to finish, on the base template. */
export async function runDemo(endpoint: { apiUrl: string; apiKey: string; sandboxUrl: string }, say: (line: string) => void): Promise<void> {
  const opts = { apiUrl: endpoint.apiUrl, apiKey: endpoint.apiKey, sandboxUrl: endpoint.sandboxUrl };
  say('');
  say('demo:');
  let t = Date.now();
  const step = (what: string) => { say(`  ${what} (${Date.now() - t} ms)`); t = Date.now(); };
  const sbx = await Sandbox.create('base', { ...opts, timeoutMs: 300_000 });
  step(`created sandbox ${sbx.sandboxId}`);
  try {
    const r = await sbx.commands.run('echo "hello from $(whoami)@$(hostname), $(python3 --version)"');
    step(`ran a command: ${r.stdout.trim()}`);
    await sbx.files.write('/home/user/demo.txt', 'written before the pause');
    step('wrote /home/user/demo.txt');
    await sbx.pause();
    step('paused it (frozen: no CPU)');
    const again = await Sandbox.connect(sbx.sandboxId, opts);
    step(`resumed it; the file says: ${await again.files.read('/home/user/demo.txt')}`);
  } finally {
    await sbx.kill();
    step('killed it');
  }
  say('');
}
