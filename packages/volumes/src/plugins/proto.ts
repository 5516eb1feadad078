/**
 * The gRPC form of the plugin protocol, loaded from proto/volume_plugin.proto. The file sits at
 * packages/volumes/proto/ when svc runs from source, and beside the bundle in dist/ (the build
 * copies it there) when it runs bundled.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadSync, type ServiceDefinition } from '@grpc/proto-loader';

const PROTO_PACKAGE = 'svc.volume.v1';

export interface VolumeProto {
  /** VolumeControllerService: Create, Destroy. */
  controller: ServiceDefinition;
  /** VolumePluginService: Attach, Detach. */
  node: ServiceDefinition;
}

/** Where the .proto is looked for, in order: the source layout, then beside the bundle. */
function protoCandidates(): string[] {
  return [
    fileURLToPath(new URL('../../proto/volume_plugin.proto', import.meta.url)),
    fileURLToPath(new URL('./volume_plugin.proto', import.meta.url)),
  ];
}

let loaded: VolumeProto | undefined;

/**
 * Messages decode with their proto field names (snake_case), int64 as number, and absent fields
 * as their defaults ('' and {}).
 */
export function volumeProto(): VolumeProto {
  if (loaded) return loaded;
  const candidates = protoCandidates();
  const file = candidates.find((f) => existsSync(f));
  if (!file) throw new Error(`volume_plugin.proto not found (looked at ${candidates.join(', ')})`);
  const def = loadSync(file, { keepCase: true, longs: Number, defaults: true });
  loaded = {
    controller: def[`${PROTO_PACKAGE}.VolumeControllerService`] as ServiceDefinition,
    node: def[`${PROTO_PACKAGE}.VolumePluginService`] as ServiceDefinition,
  };
  return loaded;
}
