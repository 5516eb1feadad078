/**
 * `Volume`: persistent volumes, shaped like the e2b SDK's. A volume outlives the sandboxes that
 * mount it (`volumeMounts: {'/data': volume}`, or `VolumeMount(volume, {readOnly: true})`) and is
 * backed by one of the platform's volume plugins (its `driver`).
 *
 * Errors: a bad name is refused here, before any request (InvalidArgumentError); a missing volume
 * is a VolumeNotFoundError; the server's other refusals are ApiErrors carrying `status` and `code`
 * (400: code 130400 for an unknown driver, or a name the team already uses; 409: a ConflictError,
 * code 130409, while a sandbox mounts the volume).
 */
import { ApiClient, type ApiRequest } from './api-client.ts';
import { ConnectionConfig, type ConnectionOpts } from './config.ts';
import { ApiError, InvalidArgumentError, SandboxError, VolumeNotFoundError } from './errors.ts';
import type { RequestOpts } from './types.ts';
import type { WireNewVolume, WireVolumeAndToken } from './wire.ts';
import { VOLUME_LIMITS, VOLUME_NAME_PATTERN } from '@svc/contracts/volumes';

/** A volume as listed: no token. */
export interface VolumeInfo {
  volumeId: string;
  name: string;
}

/** A volume with the token its plugin gave it ('' when it gave none). */
export interface VolumeAndToken extends VolumeInfo {
  token: string;
}

export interface VolumeCreateOpts extends ConnectionOpts {
  /** Letters, digits, `_` and `-`, at most 128 characters; omitted, the server names it by its id. */
  name?: string;
  /** The volume plugin; omitted, the platform's first one. */
  driver?: string;
}

/** What `VolumeMount()` makes: a target for `SandboxOpts.volumeMounts`. */
export interface VolumeMount {
  /** The volume's id (for a `Volume`), or the id or name given. */
  name: string;
  readOnly: boolean;
}

/**
 * A mount of `volume` (a `Volume`, which is mounted by its id, or a volume id or name) for
 * `SandboxOpts.volumeMounts`; `readOnly` (default false) keeps the sandbox from changing it.
 */
export function VolumeMount(volume: Volume | string, opts: { readOnly?: boolean } = {}): VolumeMount {
  const name = typeof volume === 'string' ? volume : (volume as { volumeId?: unknown } | null)?.volumeId;
  if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('VolumeMount needs a Volume, or a volume id or name');
  return { name, readOnly: opts.readOnly === true };
}

/** A refusal of the volume routes: 400 is an ApiError (409 stays a ConflictError, an ApiError too). */
const REFUSED: Pick<ApiRequest, 'errorClasses'> = { errorClasses: { 400: ApiError } };
/** On one volume's route, 404 is that volume's (on /volumes it would be a platform without volumes). */
const ONE_VOLUME: Pick<ApiRequest, 'notFound' | 'errorClasses'> = { ...REFUSED, notFound: VolumeNotFoundError };

/** The `{volumeID}` of a volume's route: its id, or the team's name for it. */
const volumeParams = (volumeId: string) => {
  if (typeof volumeId !== 'string' || volumeId === '') throw new InvalidArgumentError('a volume id (or name) is required');
  return { volumeID: volumeId };
};

function checkName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('the volume name must be a non-empty string');
  if (name.length > VOLUME_LIMITS.nameChars) {
    throw new InvalidArgumentError(`the volume name has ${name.length} characters; at most ${VOLUME_LIMITS.nameChars}`);
  }
  if (!VOLUME_NAME_PATTERN.test(name)) throw new InvalidArgumentError(`the volume name ${JSON.stringify(name)} must match ${VOLUME_NAME_PATTERN}`);
  return name;
}

function withToken(w: WireVolumeAndToken | undefined): VolumeAndToken {
  if (!w?.volumeID) throw new SandboxError('the API did not return a volume id');
  return { volumeId: w.volumeID, name: w.name, token: w.token ?? '' };
}

export class Volume {
  readonly volumeId: string;
  readonly name: string;
  /** The plugin's token for the volume; '' when it gave none. */
  readonly token: string;
  /** Where later calls go; a private field, so it never shows in JSON. */
  readonly #conn: ConnectionOpts;

  /** @internal Use `Volume.create` or `Volume.connect`. */
  constructor(info: VolumeAndToken, opts: ConnectionOpts = {}) {
    this.volumeId = info.volumeId;
    this.name = info.name;
    this.token = info.token;
    this.#conn = new ConnectionConfig(opts).toOpts();
  }

  /** Creates a volume; the name is checked before anything is sent. */
  static async create(opts?: VolumeCreateOpts): Promise<Volume>;
  static async create(name?: string, opts?: Omit<VolumeCreateOpts, 'name'>): Promise<Volume>;
  static async create(nameOrOpts?: string | VolumeCreateOpts, maybeOpts?: VolumeCreateOpts): Promise<Volume> {
    const opts = (typeof nameOrOpts === 'object' && nameOrOpts !== null ? nameOrOpts : maybeOpts) ?? {};
    const name = typeof nameOrOpts === 'object' && nameOrOpts !== null ? opts.name : nameOrOpts;
    const body: WireNewVolume = {};
    if (name !== undefined) body.name = checkName(name);
    if (opts.driver !== undefined) {
      if (typeof opts.driver !== 'string' || opts.driver === '') throw new InvalidArgumentError('driver must be a non-empty string');
      body.driver = opts.driver;
    }
    const api = new ApiClient(opts);
    const created = await api.request('POST', '/volumes', { body, ...REFUSED, signal: opts.signal });
    return new Volume(withToken(created), api.config.toOpts());
  }

  /** The volume with this id (or the team's volume with this name); a VolumeNotFoundError when there is none. */
  static async connect(volumeId: string, opts: ConnectionOpts = {}): Promise<Volume> {
    const api = new ApiClient(opts);
    const info = withToken(await api.request('GET', '/volumes/{volumeID}', { params: volumeParams(volumeId), ...ONE_VOLUME, signal: opts.signal }));
    return new Volume(info, api.config.toOpts());
  }

  /** The team's volumes, without their tokens. */
  static async list(opts: ConnectionOpts = {}): Promise<VolumeInfo[]> {
    const listed = await new ApiClient(opts).request('GET', '/volumes', { ...REFUSED, signal: opts.signal });
    return (Array.isArray(listed) ? listed : []).map((v) => ({ volumeId: v.volumeID, name: v.name }));
  }

  /** The volume with this id (or name) and its token; a VolumeNotFoundError when there is none. */
  static async getInfo(volumeId: string, opts: ConnectionOpts = {}): Promise<VolumeAndToken> {
    return withToken(await new ApiClient(opts).request('GET', '/volumes/{volumeID}', { params: volumeParams(volumeId), ...ONE_VOLUME, signal: opts.signal }));
  }

  /**
   * Destroys the volume and its data: true when it did, false when there was no such volume. A
   * volume a sandbox still mounts is refused with a ConflictError (code 130409).
   */
  static async destroy(volumeId: string, opts: ConnectionOpts = {}): Promise<boolean> {
    const params = volumeParams(volumeId);
    try {
      await new ApiClient(opts).request('DELETE', '/volumes/{volumeID}', { params, ...ONE_VOLUME, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof VolumeNotFoundError) return false;
      throw err;
    }
  }

  /** The same as `destroy`. */
  static async delete(volumeId: string, opts: ConnectionOpts = {}): Promise<boolean> {
    return Volume.destroy(volumeId, opts);
  }

  /** Destroys this volume (see `Volume.destroy`). */
  async destroy(opts: RequestOpts = {}): Promise<boolean> {
    return Volume.destroy(this.volumeId, { ...this.#conn, ...opts });
  }

  /** The same as `destroy`. */
  async delete(opts: RequestOpts = {}): Promise<boolean> {
    return this.destroy(opts);
  }
}
