import { SvcError, type Logger } from '@svc/common';
import { VolumePluginError } from '@svc/volumes';

/** What the caller was doing, as the message says it. */
const DOING = { create: 'create', destroy: 'delete the data of' } as const;

/**
 * A plugin hook's failure as the API caller is told it. A plugin's own words (its `error`, its
 * stderr, an errno message) may name the host's paths (`/data/svc-shared/volume-data/<id>`,
 * `mount --bind ...`), so they go to the master's log with the volume's id, and the caller gets
 * the plugin's name and where to look; only a reason svc worded itself (VolumePluginError
 * .forCaller: a token too short) is passed on. svc's own errors (400 unknown driver) pass as they are.
 */
export function pluginFailure(logger: Logger, driver: string, op: keyof typeof DOING, volume: { volumeId: string; name: string }, err: Error): SvcError {
  if (err instanceof SvcError) return err;
  logger.error({ volumeId: volume.volumeId, name: volume.name, driver, op, err: err.message }, `volume plugin ${op} failed`);
  const why = err instanceof VolumePluginError && err.forCaller ? `: ${err.forCaller}` : '; the master\'s log has the detail';
  return new SvcError(500, `the volume plugin '${driver}' could not ${DOING[op]} volume ${volume.name}${why}`);
}
