/**
 * Persistent volumes' plugin runtime (docs/volume-plugins.md): the clients of `binary` and `rpc`
 * volume plugins, the registry the master and the node agent look drivers up in, and the
 * built-in `local` plugin.
 */
export { VolumePluginError, type VolumeHookName } from './plugins/errors.ts';
export { BinaryVolumePlugin } from './plugins/binary-plugin.ts';
export { RpcVolumePlugin, grpcTarget } from './plugins/rpc-plugin.ts';
export { VolumePluginRegistry, pluginFor, checkPluginConfigs, PLUGIN_NAME_PATTERN } from './plugins/registry.ts';
export { hookArgs, parseHookArgs, type HookCall } from './plugins/binary-flags.ts';
export {
  LocalVolumes,
  LocalVolumeError,
  DEFAULT_LOCAL_VOLUME_ROOT,
  type LocalVolumeErrorKind,
  type LocalVolumesOptions,
} from './local-plugin/local-volumes.ts';
export { startLocalRpcServer, type LocalRpcServer, type LocalRpcServerOptions } from './local-plugin/rpc-server.ts';
export { VolumeContent, type VolumeContentOptions, type FileDownload } from './content/content-ops.ts';
export { registerVolumeContentRoutes, type OpenedVolume, type VolumeContentRouteOptions } from './content/content-routes.ts';
