import type { BuilderStatus } from '../templates/builder-port.ts';
import type { BuildService } from './service.ts';

/**
 * The template module's view of the builder, bound late: the template module starts before the
 * sandbox service the builder needs, so `current()` is undefined until the builder exists (and
 * stays so when the master runs without one); until then no template has builder builds.
 */
export function lateBuilderStatus(current: () => BuildService | undefined): BuilderStatus {
  return {
    status: (t, b, q) => current()?.status(t, b, q) ?? Promise.resolve(undefined),
    snapshotOfTag: (t, tag) => current()?.snapshotOfTag(t, tag) ?? Promise.resolve(undefined),
    buildsOf: (t) => current()?.buildsOf(t) ?? Promise.resolve([]),
  };
}
