/**
 * The master's download routes for node agents: what the template center's artifact store holds
 * under an id, relayed (its bytes, or a redirect to a presigned URL when the store is S3); HEAD
 * answers the headers alone. The master hands out their URLs (pathTo): a build's context files
 * as a COPY step's input (ExecInput.url), a snapshot layer as a create's layer downloadUrl; the
 * node agent fetches the URL it is given.
 *   GET|HEAD /internal/v1/template-files/:team/:hash → a team's context files archive of a files hash (64 hex digits; 400 otherwise)
 *   GET|HEAD /internal/v1/layers/:layerId      → a snapshot layer's tar (400 for an id that is not one)
 */
import type { RouteTable } from './route-table.ts';

export const MASTER_DOWNLOAD_ROUTES = {
  templateFiles: { method: 'GET', path: '/internal/v1/template-files/:team/:hash' },
  layer: { method: 'GET', path: '/internal/v1/layers/:layerId' },
} as const satisfies RouteTable;
