/** What the volume service needs from the rest of the master, as small interfaces. */
import type { NodeVolumeAttachment, VolumeControllerHooks } from '@svc/contracts/volumes';

/** The master's volume_plugins (packages/volumes' registry). */
export interface ControllerPlugins {
  /** The first configured plugin's name; undefined when none is. */
  defaultDriver(): string | undefined;
  /** Throws 400 code 130400 `unknown driver` when the master has no plugin of that name. */
  controller(driver: string): VolumeControllerHooks;
}

/** A sandbox the master's records put on a node that does not answer, mounting a volume. */
export interface UnreachableHolder {
  nodeId: string;
  sandboxId: string;
}

/** The node agents, as far as volumes go. */
export interface VolumeNodes {
  /** Live nodes whose agent supports volumes, with a base URL to reach each. */
  live(): Promise<Array<{ nodeId: string; baseUrl: string; headers: Record<string, string> }>>;
  /** The node-local counts of one node. */
  attachments(nodeId: string): Promise<NodeVolumeAttachment[]>;
  /**
   * The team's sandboxes, not terminated, that mount the volume (by id, or by `name` in records
   * older than ids) on nodes that are not live and support volumes: such a node cannot be asked,
   * and may hold the volume mounted still.
   */
  unreachableHolders(volume: { volumeId: string; name: string; teamId: string }): Promise<UnreachableHolder[]>;
}
