/**
 * MCP (issue 36, docs/mcp.md), on `svc up`:
 *   - `run_command('true')` through svc's MCP server over streamable HTTP (the API's /mcp, with
 *     the official MCP SDK's client) against the same command through the official e2b SDK's
 *     `commands.run('true')` on the same sandbox, alternating (goal: at most 1.3×);
 *   - `Sandbox.create({ mcp })` of the official e2b SDK until the gateway's first `tools/list`
 *     answers through the proxy, against a plain `Sandbox.create()` of `base` (goal: at most 2 s
 *     over it on this machine), and a plain create of the `mcp-gateway` template itself (base's
 *     files under a layer, without base's warm pool), which separates the gateway's start from
 *     the template's.
 *
 *   node --import tsx bench/mcp.ts [--n 60]
 * Run as root. Prints a table and writes bench/results/mcp.json.
 */
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { callTool, connectHttp, sandboxIdOf, textOf } from '../test/e2e/mcp-client.ts';
import { printTable, ratio, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('n', 60);
const CREATES = Math.max(3, Math.round(N / 12));

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

async function main(): Promise<void> {
  const p = await startPlatform({ dataDir: '/tmp/svc-bench-mcp', env: { SVC_MCP_GATEWAY_TEMPLATE: 'true', SVC_ADDRESS_POOL: '10.214.0.0/16', SVC_LOG_LEVEL: 'warn' } });
  platform = p;
  useE2bEnv(p);
  const rows: Record<string, Stat> = {};
  try {
    // run_command over MCP against commands.run through the e2b SDK, on one sandbox, alternating.
    const { client } = await connectHttp(`${p.apiUrl}/mcp`, { 'X-API-Key': p.apiKey });
    const id = sandboxIdOf(await callTool(client, 'create_sandbox', { template: 'base', timeoutSeconds: 600 }));
    const sbx = await Sandbox.connect(id);
    const viaMcp = async () => {
      const r = await callTool(client, 'run_command', { sandboxId: id, command: 'true' });
      if (r.isError) throw new Error(`run_command failed: ${textOf(r)}`);
    };
    const viaSdk = async () => { await sbx.commands.run('true'); };
    for (let i = 0; i < 5; i++) { await viaMcp(); await viaSdk(); }
    const mcp: number[] = [];
    const sdk: number[] = [];
    for (let i = 0; i < N; i++) {
      mcp.push((await timed(viaMcp))[0]);
      sdk.push((await timed(viaSdk))[0]);
    }
    rows["run_command('true') over MCP HTTP (ms)"] = stat(mcp);
    rows["commands.run('true') via e2b SDK (ms)"] = stat(sdk);
    await sbx.kill();
    await client.close();

    // Sandbox.create({ mcp }) to the gateway's first tools/list, against a plain create.
    const plain: number[] = [];
    const plainGateway: number[] = [];
    const withMcp: number[] = [];
    for (let i = 0; i < CREATES; i++) {
      const [ms, s] = await timed(() => Sandbox.create('base'));
      plain.push(ms);
      await s.kill();
      const [msGw, gw] = await timed(() => Sandbox.create('mcp-gateway'));
      plainGateway.push(msGw);
      await gw.kill();
      let gateway: Sandbox | undefined;
      const [msMcp] = await timed(async () => {
        gateway = await Sandbox.create({ mcp: { filesystem: { paths: ['/home/user'] } } });
        const token = await gateway.getMcpToken();
        const c = await connectHttp(`${p.sandboxUrl}/mcp`, { 'E2b-Sandbox-Id': gateway.sandboxId, 'E2b-Sandbox-Port': '50005', Authorization: `Bearer ${token}` });
        await c.client.listTools();
        await c.client.close();
      });
      // Killed after the clock stops: the figure is the create's, not the kill's.
      await gateway?.kill();
      withMcp.push(msMcp);
    }
    rows['Sandbox.create() of base (ms)'] = stat(plain);
    rows['Sandbox.create() of mcp-gateway, no mcp (ms)'] = stat(plainGateway);
    rows['Sandbox.create({ mcp }) → first tools/list (ms)'] = stat(withMcp);
  } finally {
    await p.stop();
    platform = undefined;
  }

  printTable('MCP (this machine: 2 cores, gVisor ptrace)', rows);
  const mcpOverSdk = ratio(rows["run_command('true') over MCP HTTP (ms)"]!.p50, rows["commands.run('true') via e2b SDK (ms)"]!.p50);
  const gatewayAddedMs = Math.round(rows['Sandbox.create({ mcp }) → first tools/list (ms)']!.p50 - rows['Sandbox.create() of base (ms)']!.p50);
  const startAddedMs = Math.round(rows['Sandbox.create({ mcp }) → first tools/list (ms)']!.p50 - rows['Sandbox.create() of mcp-gateway, no mcp (ms)']!.p50);
  console.log(`run_command over MCP / e2b SDK, p50: ${mcpOverSdk}× (goal ≤ 1.3×)`);
  console.log(`Sandbox.create({ mcp }) adds ${gatewayAddedMs} ms at p50 to a plain create of base (goal ≤ 2000), ${startAddedMs} ms to one of mcp-gateway`);
  const file = writeResult('mcp', { n: N, creates: CREATES, latency: rows, ratios: { mcpOverSdkP50: mcpOverSdk }, gatewayAddedP50Ms: gatewayAddedMs, gatewayStartAddedP50Ms: startAddedMs });
  console.log(`wrote ${file}`);
}

main().catch(async (err) => {
  console.error(err);
  await platform?.stop();
  process.exit(1);
});
