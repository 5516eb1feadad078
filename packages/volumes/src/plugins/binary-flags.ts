/**
 * The command line of a binary plugin's hook (docs/volume-plugins.md): what the node agent and
 * the master pass (hookArgs), and how a plugin written in TypeScript reads it (parseHookArgs,
 * used by the built-in local plugin). Each flag's value is the next argument, and may begin
 * with '-'; `--flag=value` is read as well.
 *
 *   create   --op create  --volume-id ID --name NAME
 *   destroy  --op destroy --volume-id ID
 *   attach   --op attach  --volume-id ID --sandbox-id SB --namespace NS --ref-count N
 *                         --volume-base-dir DIR [--private-data DATA]   (N: holders before)
 *   detach   --op detach  --volume-id ID --sandbox-id SB --namespace NS --ref-count N
 *                         --metadata JSON                                (N: holders after)
 */
import type { AttachHookInput, CreateHookInput, DestroyHookInput, DetachHookInput } from '@svc/contracts/volumes';
import type { VolumeHookName } from './errors.ts';

export type HookCall =
  | { op: 'create'; input: CreateHookInput }
  | { op: 'destroy'; input: DestroyHookInput }
  | { op: 'attach'; input: AttachHookInput }
  | { op: 'detach'; input: DetachHookInput };

export function hookArgs(call: HookCall): string[] {
  const args = ['--op', call.op, '--volume-id', call.input.volumeId];
  switch (call.op) {
    case 'create':
      return [...args, '--name', call.input.name];
    case 'destroy':
      return args;
    case 'attach': {
      const i = call.input;
      args.push('--sandbox-id', i.sandboxId, '--namespace', i.namespace, '--ref-count', String(i.refCount), '--volume-base-dir', i.volumeBaseDir);
      if (i.privateData !== '') args.push('--private-data', i.privateData);
      return args;
    }
    case 'detach': {
      const i = call.input;
      return [...args, '--sandbox-id', i.sandboxId, '--namespace', i.namespace, '--ref-count', String(i.refCount), '--metadata', JSON.stringify(i.metadata)];
    }
  }
}

const OPS: readonly VolumeHookName[] = ['create', 'destroy', 'attach', 'detach'];

/** Reads `--name value` and `--name=value` pairs; throws on a flag without its value. Unknown flags are kept and ignored by the caller. */
export function readFlags(argv: string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    if (eq > 0) {
      flags.set(arg.slice(2, eq), arg.slice(eq + 1));
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
    flags.set(arg.slice(2), argv[++i]);
  }
  return flags;
}

/** The hook a binary plugin is asked for; throws an Error saying what is wrong with the command line. */
export function parseHookArgs(argv: string[]): HookCall {
  const flags = readFlags(argv);
  const op = flags.get('op');
  if (!OPS.includes(op as VolumeHookName)) throw new Error(`--op must be one of ${OPS.join(', ')}`);
  const required = (name: string) => {
    const v = flags.get(name);
    if (v === undefined || v === '') throw new Error(`--${name} is required for --op ${op}`);
    return v;
  };
  const refCount = () => {
    const v = required('ref-count');
    if (!/^\d{1,15}$/.test(v)) throw new Error(`--ref-count must be a non-negative integer, not ${JSON.stringify(v)}`);
    return Number(v);
  };
  const volumeId = required('volume-id');
  const common = () => ({ volumeId, sandboxId: flags.get('sandbox-id') ?? '', namespace: flags.get('namespace') ?? '', refCount: refCount() });
  switch (op as VolumeHookName) {
    case 'create':
      return { op: 'create', input: { volumeId, name: required('name') } };
    case 'destroy':
      return { op: 'destroy', input: { volumeId } };
    case 'attach':
      return { op: 'attach', input: { ...common(), volumeBaseDir: required('volume-base-dir'), privateData: flags.get('private-data') ?? '' } };
    case 'detach':
      return { op: 'detach', input: { ...common(), metadata: parseMetadata(flags.get('metadata') ?? '{}') } };
  }
}

function parseMetadata(text: string): Record<string, string> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Error('--metadata must be a JSON object of strings');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== 'string')) {
    throw new Error('--metadata must be a JSON object of strings');
  }
  return v as Record<string, string>;
}
