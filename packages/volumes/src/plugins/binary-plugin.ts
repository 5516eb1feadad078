/**
 * A `binary` volume plugin: one run of `binary_path` per hook, the hook's flags in
 * (binary-flags.ts), one JSON object on stdout out. A run fails on a start error, a non-zero
 * exit, a signal, the deadline (the run's process group is killed), stdout that is not one JSON
 * object, a non-empty `error`, or fields beyond the protocol's limits (answers.ts).
 */
import {
  DEFAULT_HOOK_TIMEOUT_MS,
  type AttachHookInput,
  type AttachHookOutput,
  type CreateHookInput,
  type CreateHookOutput,
  type DestroyHookInput,
  type DetachHookInput,
  type VolumePlugin,
  type VolumePluginConfig,
} from '@svc/contracts/volumes';
import { runCommand, type RunResult } from '../run-command.ts';
import { checkAttachAnswer, checkCreateAnswer, type Answer } from './answers.ts';
import { hookArgs, type HookCall } from './binary-flags.ts';
import { VolumePluginError } from './errors.ts';

const STDOUT_LIMIT = 64 * 1024;
const STDERR_LIMIT = 8 * 1024;
/** How much of stderr, or of unreadable stdout, a failure message quotes. */
const QUOTE_CHARS = 200;
const STDERR_QUOTE_CHARS = 1_000;

export class BinaryVolumePlugin implements VolumePlugin {
  readonly name: string;
  readonly type = 'binary' as const;
  readonly binaryPath: string;
  readonly timeoutMs: number;

  constructor(config: VolumePluginConfig) {
    if (!config.binary_path) throw new Error(`volume plugin ${config.name}: binary_path is required`);
    this.name = config.name;
    this.binaryPath = config.binary_path;
    this.timeoutMs = config.timeout_ms ?? DEFAULT_HOOK_TIMEOUT_MS;
  }

  async create(input: CreateHookInput): Promise<CreateHookOutput> {
    return checkCreateAnswer(await this.run({ op: 'create', input }, false), this.name);
  }

  async destroy(input: DestroyHookInput): Promise<void> {
    await this.run({ op: 'destroy', input }, true);
  }

  async attach(input: AttachHookInput): Promise<AttachHookOutput> {
    return checkAttachAnswer(await this.run({ op: 'attach', input }, false), this.name);
  }

  async detach(input: DetachHookInput): Promise<void> {
    await this.run({ op: 'detach', input }, true);
  }

  async close(): Promise<void> {
    // nothing runs between hooks
  }

  /** Runs the hook; answers its JSON object, or throws VolumePluginError. */
  private async run(call: HookCall, emptyIsOk: boolean): Promise<Answer> {
    const fail: (reason: string) => never = (reason) => {
      throw new VolumePluginError(this.name, call.op, reason);
    };
    const r = await runCommand(this.binaryPath, hookArgs(call), {
      timeoutMs: this.timeoutMs,
      maxStdoutBytes: STDOUT_LIMIT,
      maxStderrBytes: STDERR_LIMIT,
    });
    if (r.spawnError) {
      const e = r.spawnError;
      fail(`cannot run ${this.binaryPath}: ${/^E[A-Z]+$/.test(e.code ?? '') ? e.code : e.message}`);
    }
    if (r.timedOut) fail(`did not answer within ${this.timeoutMs} ms${stderrTail(r)}`);
    if (r.signal) fail(`killed by ${r.signal}${stderrTail(r)}`);
    if (r.stdoutOverflow) fail(`printed more than ${STDOUT_LIMIT} bytes on stdout`);

    const text = r.stdout.trim();
    let answer: Answer | undefined;
    let unreadable: string | undefined;
    if (text !== '') {
      try {
        const v: unknown = JSON.parse(text);
        if (typeof v === 'object' && v !== null && !Array.isArray(v)) answer = v as Answer;
        else unreadable = 'printed JSON that is not an object';
      } catch {
        unreadable = `printed no JSON: ${quote(text, QUOTE_CHARS)}`;
      }
    }
    const said = answer && typeof answer.error === 'string' && answer.error !== '' ? answer.error : undefined;
    if (r.code !== 0) fail(`exit code ${r.code}: ${said ?? (r.stderr.trim() ? quote(r.stderr.trim(), STDERR_QUOTE_CHARS, true) : 'no message')}`);
    if (said !== undefined) fail(said);
    if (unreadable) fail(unreadable);
    if (answer === undefined) {
      if (emptyIsOk) return {};
      fail('printed nothing on stdout; it must print a JSON object');
    }
    const error = answer.error;
    if (error !== undefined && error !== null && error !== '') fail(`answered an error of type ${typeof error}; it must be a string`);
    return answer;
  }
}

function stderrTail(r: RunResult): string {
  const tail = r.stderr.trim();
  return tail ? `: ${quote(tail, STDERR_QUOTE_CHARS, true)}` : '';
}

/** At most `chars` characters of `text`: its head, or its tail. */
function quote(text: string, chars: number, tail = false): string {
  if (text.length <= chars) return text;
  return tail ? `…${text.slice(text.length - chars)}` : `${text.slice(0, chars)}…`;
}
