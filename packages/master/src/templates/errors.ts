/** The template domain's wire errors (docs/design.md, "Errors"). */
import { badRequest, conflict, ErrorCodes, notFound, SvcError, unavailable } from '@svc/common';

export const templateIdRequired = () =>
  badRequest('ErrTemplateIDRequired: template_id is required', ErrorCodes.badRequest);

export const duplicateTemplate = (alias: string) =>
  badRequest(`ErrDuplicateTemplate: alias "${alias}" is already used by another template`, ErrorCodes.badRequest);

export const invalidTemplateRequest = (message: string) => badRequest(message, ErrorCodes.badRequest);

export const templateHasSnapshots = (ref: string, snapshotIds: string[]) =>
  conflict(`template ${ref} has snapshots or built templates that start from it: ${snapshotIds.slice(0, 20).join(', ')}${snapshotIds.length > 20 ? ` and ${snapshotIds.length - 20} more` : ''}; delete them first`, ErrorCodes.conflict);

/** A template the platform makes for itself is not there yet, or failed to build: the platform's fault, so 503. */
export const templateBuildUnavailable = (message: string, retryAfterSec?: number) => unavailable(message, retryAfterSec);

export const templateNotFound = (ref: string) => notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);

/** The reason recorded on a job whose built artifact had nowhere to go. */
export const NO_TEMPLATE_NODES = 'ErrNoTemplateNodes: no live node to distribute the artifact to; register a node agent, then redo the template';

/**
 * Failures of the template store are database errors on the wire (docs/templates.md: ErrTemplateStoreNotInitialized
 * maps to a database error), never a bare "internal error".
 */
export function storeError(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  const first = String((err as Error)?.message ?? err).split('\n')[0].slice(0, 200);
  if (/no such table|does not exist|doesn't exist/i.test(first)) {
    return new SvcError(500, `database error: ErrTemplateStoreNotInitialized: the template tables are missing (${first})`);
  }
  return new SvcError(500, `database error: ${first}`);
}
