/**
 * The routes the SDK calls that the public OpenAPI document (@svc/contracts, `PUBLIC_API`) does not
 * describe, for `ApiClient.request`. Their shapes are the contracts' hand-written interfaces,
 * checked against no schema: this table is where the SDK takes them on trust, and the only place.
 * Types only. A key is `'METHOD path'`, the path a template whose `{name}`s the client fills.
 *
 * When the document comes to describe one of these routes, tsc fails at `NotInTheDocument` below,
 * naming it: move its callers to `ApiClient.call` and drop its entry.
 */
import type { PublicJsonPath, PublicMethod } from '@svc/contracts/public-api-operations';
import type { ApiKeyRecord, CreatedKey, CreateTeamInput, TeamLimits, TeamRecord } from '@svc/contracts/teams';
import type { NewVolume, VolumeAndToken, VolumeInfo } from '@svc/contracts/volumes';
import type { EVENT_ROUTES, WireSandboxEvent, WireWebhook } from '@svc/contracts/events';
import type { BodyOf } from '@svc/contracts/route-table';

/** A new team: its first key, shown this once. */
export interface CreatedTeamInfo {
  teamId: string;
  apiKey: string;
  apiKeyId: string;
  team: TeamRecord;
}

interface OffDocumentRoutes {
  // E2B's volumes (docs/api.md, "Volumes"): the gateway forwards them to the master's /svc/volume
  // as they are (packages/api/src/volume-routes.ts), with no schema of its own to put in the document.
  'GET /volumes': { answer: VolumeInfo[] };
  'POST /volumes': { body: NewVolume; answer: VolumeAndToken };
  'GET /volumes/{volumeID}': { answer: VolumeAndToken };
  'DELETE /volumes/{volumeID}': { answer: undefined };

  // svc's teams and API keys (docs/api.md, docs/security.md): administration routes the gateway
  // registers beside the document (packages/api/src/team-routes.ts), answered from its team store.
  'POST /svc/teams': { body: CreateTeamInput; answer: CreatedTeamInfo };
  'GET /svc/teams': { answer: TeamRecord[] };
  'GET /svc/teams/{id}': { answer: TeamRecord };
  'PATCH /svc/teams/{id}': { body: { limits: Partial<TeamLimits> }; answer: TeamRecord };
  'POST /svc/teams/{id}/keys': { body: { name?: string }; answer: CreatedKey };
  'GET /svc/keys': { answer: ApiKeyRecord[] };
  /** The query in the template: its value is encoded as a path parameter is (encodeURIComponent), as the SDK always sent it. */
  'GET /svc/keys?teamId={teamId}': { answer: ApiKeyRecord[] };
  'DELETE /svc/keys/{id}': { answer: undefined };

  // E2B's lifecycle events and webhooks (@svc/contracts/events): the master's routes, which the
  // gateway forwards unchanged. The bodies are the master's route table's, whose schemas check them.
  'GET /events/sandboxes': { answer: WireSandboxEvent[] };
  'GET /events/sandboxes/{sandboxID}': { answer: WireSandboxEvent[] };
  'POST /events/webhooks': { body: BodyOf<typeof EVENT_ROUTES.createWebhook>; answer: WireWebhook };
  'GET /events/webhooks': { answer: WireWebhook[] };
  'GET /events/webhooks/{webhookID}': { answer: WireWebhook };
  'PATCH /events/webhooks/{webhookID}': { body: BodyOf<typeof EVENT_ROUTES.updateWebhook>; answer: WireWebhook };
  'DELETE /events/webhooks/{webhookID}': { answer: undefined };
}

/** The table's path templates of `M`. */
export type OffDocumentPath<M extends PublicMethod> = {
  [K in keyof OffDocumentRoutes]: K extends `${M} ${infer P}` ? P : never;
}[keyof OffDocumentRoutes];

export type OffDocumentRoute<M extends PublicMethod, P extends string> = OffDocumentRoutes[`${M} ${P}` & keyof OffDocumentRoutes];

/** A route with its parameters' names dropped, `GET /volumes/{}`: the same route whatever they are called. */
type Shape<K extends string> = K extends `${infer A}{${string}}${infer Rest}` ? `${A}{}${Shape<Rest>}` : K;
type DocumentRoute = { [M in PublicMethod]: `${M} ${PublicJsonPath<M>}` }[PublicMethod];
/** A constraint that only `never` meets: the routes of the table the document has. */
type NotInTheDocument<Routes extends never> = Routes;
type OffDocumentChecked = NotInTheDocument<Extract<Shape<keyof OffDocumentRoutes>, Shape<DocumentRoute>>>;
