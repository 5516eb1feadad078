/**
 * An `rpc` volume plugin: a long-running gRPC service (proto/volume_plugin.proto) at
 * `socket_path`. One channel serves both services; it is opened at the first hook. Each call has
 * the plugin's timeout as its deadline; a failed call is a VolumePluginError with the gRPC status.
 */
import { Client, credentials, status, type ServiceError } from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
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
import { checkAttachAnswer, checkCreateAnswer, type Answer } from './answers.ts';
import { VolumePluginError, type VolumeHookName } from './errors.ts';
import { volumeProto } from './proto.ts';

/** Answers are small (answers.ts); a larger message is refused by the channel. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * The gRPC target of a `socket_path`: `unix:PATH` as given, `host:port` (also `[v6]:port`) as a
 * TCP address, anything else as the path of a Unix socket.
 */
export function grpcTarget(socketPath: string): string {
  if (socketPath.startsWith('unix:')) return socketPath;
  if (/^[^/]+:\d+$/.test(socketPath)) return socketPath;
  return `unix:${socketPath}`;
}

export class RpcVolumePlugin implements VolumePlugin {
  readonly name: string;
  readonly type = 'rpc' as const;
  readonly target: string;
  readonly timeoutMs: number;
  private client: Client | undefined;

  constructor(config: VolumePluginConfig) {
    if (!config.socket_path) throw new Error(`volume plugin ${config.name}: socket_path is required`);
    this.name = config.name;
    this.target = grpcTarget(config.socket_path);
    this.timeoutMs = config.timeout_ms ?? DEFAULT_HOOK_TIMEOUT_MS;
  }

  async create(input: CreateHookInput): Promise<CreateHookOutput> {
    const answer = await this.call('create', 'controller', 'Create', { volume_id: input.volumeId, name: input.name });
    return checkCreateAnswer(answer, this.name);
  }

  async destroy(input: DestroyHookInput): Promise<void> {
    await this.call('destroy', 'controller', 'Destroy', { volume_id: input.volumeId });
  }

  async attach(input: AttachHookInput): Promise<AttachHookOutput> {
    const answer = await this.call('attach', 'node', 'Attach', {
      sandbox_id: input.sandboxId,
      namespace: input.namespace,
      volume_id: input.volumeId,
      ref_count: input.refCount,
      volume_base_dir: input.volumeBaseDir,
      private_data: input.privateData,
    });
    return checkAttachAnswer(answer, this.name);
  }

  async detach(input: DetachHookInput): Promise<void> {
    await this.call('detach', 'node', 'Detach', {
      sandbox_id: input.sandboxId,
      namespace: input.namespace,
      volume_id: input.volumeId,
      ref_count: input.refCount,
      metadata: input.metadata,
    });
  }

  async close(): Promise<void> {
    this.client?.close();
    this.client = undefined;
  }

  private call(op: VolumeHookName, service: 'controller' | 'node', method: string, request: object): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const fail = (reason: string) => reject(new VolumePluginError(this.name, op, reason));
      try {
        const def = volumeProto()[service][method] as MethodDefinition<object, object>;
        this.client ??= new Client(this.target, credentials.createInsecure(), { 'grpc.max_receive_message_length': MAX_ANSWER_BYTES });
        this.client.makeUnaryRequest(
          def.path,
          def.requestSerialize,
          def.responseDeserialize,
          request,
          { deadline: Date.now() + this.timeoutMs },
          (err: ServiceError | null, answer?: object) => {
            if (err) fail(this.statusReason(err));
            else resolve((answer ?? {}) as Answer);
          },
        );
      } catch (err) {
        fail(`cannot call ${this.target}: ${(err as Error).message}`);
      }
    });
  }

  private statusReason(err: ServiceError): string {
    const name = status[err.code] ?? String(err.code);
    const details = err.details || err.message;
    if (err.code === status.DEADLINE_EXCEEDED) return `did not answer within ${this.timeoutMs} ms (gRPC ${name} at ${this.target})`;
    if (err.code === status.UNAVAILABLE) return `cannot reach ${this.target} (gRPC ${name}): ${details}`;
    return `gRPC ${name}: ${details}`;
  }
}
