/**
 * GET /metrics: the Prometheus metrics of the process that answers, in the text format
 * (docs/observability.md, "Prometheus"). Every component's route table holds it under its own
 * port's guard: `svc up` answers the whole platform on each, a cluster's components their own.
 */
import { answers, type Route } from './route-table.ts';

export const METRICS_ROUTE = { method: 'GET', path: '/metrics', answer: answers<string>() } as const satisfies Route;
