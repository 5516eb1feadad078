import { ErrorCodes, notFound } from '@svc/common';
import { bodyField, pathParam, queryField, type OwnedRoute, type Owner } from './ownership.ts';

/** How the master finds the owner of each kind of resource a route names. */
export interface OwnerLookups {
  sandbox(id: string): Promise<Owner | undefined>;
  snapshot(ref: string): Promise<Owner | undefined>;
  /** A template by id, alias or `name:tag`. */
  template(ref: string): Promise<Owner | undefined>;
  /** The template a build job builds. */
  job(jobId: string): Promise<Owner | undefined>;
}

const templateMissing = (ref: string) => notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);

/**
 * Every master route that names a resource, and where it names it (docs/security.md, "Isolation").
 * A new route that takes an id belongs here; routes.test in teams checks that none is left out.
 */
export function masterOwnedRoutes(find: OwnerLookups): OwnedRoute[] {
  // E2B deletes a snapshot through DELETE /templates/{id}: that route's id may be either.
  const templateOrSnapshot = async (ref: string) => (await find.template(ref)) ?? find.snapshot(ref);
  return [
    { route: /^\/v1\/sandboxes\/:id(\/|$)/, idOf: pathParam('id'), ownerOf: find.sandbox, notFound: (id) => notFound(`sandbox ${id} not found`) },
    { route: /^\/v1\/snapshots\/:id$/, idOf: pathParam('id'), ownerOf: find.snapshot, notFound: (id) => notFound(`snapshot ${id} not found`) },
    { route: /:templateID(\/|$)/, idOf: pathParam('templateID'), ownerOf: templateOrSnapshot, notFound: templateMissing },
    { route: /^\/svc\/template\/:id(\/|$)/, idOf: pathParam('id'), ownerOf: find.template, notFound: templateMissing },
    { route: /^\/templates\/aliases\/:alias$/, idOf: pathParam('alias'), ownerOf: find.template, notFound: templateMissing },
    { route: /^\/templates\/tags$/, idOf: (req) => bodyField('target')(req) ?? bodyField('name')(req), ownerOf: find.template, notFound: templateMissing },
    { route: /^\/svc\/template\/(redo|migrate)$/, idOf: bodyField('template_id'), ownerOf: find.template, notFound: templateMissing },
    { route: /^\/svc\/template\/build\/:jobId\/status$/, idOf: pathParam('jobId'), ownerOf: find.job, notFound: (id) => notFound(`build job ${id} not found`) },
    { route: /^\/svc\/template\/from-image$/, idOf: queryField('job_id'), ownerOf: find.job, notFound: (id) => notFound(`build job ${id} not found`) },
  ];
}
