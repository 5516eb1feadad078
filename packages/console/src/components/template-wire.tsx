/**
 * The template routes' answers as the console reads them (packages/contracts/src/template-route-schemas.ts;
 * the console bundles no server code, so the shapes it uses are restated here).
 */
import type { Api } from '../api.ts';

export type BuildStatus = 'building' | 'waiting' | 'ready' | 'error';

/** E2B's template as GET /templates lists it. */
export interface E2bTemplate {
  templateID: string;
  buildID: string;
  aliases: string[];
  names: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  public: boolean;
  createdAt: string;
  updatedAt: string;
  buildCount: number;
  buildStatus: BuildStatus;
  envdVersion: string;
}

export interface E2bBuild {
  buildID: string;
  status: BuildStatus;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  createdAt: string;
  updatedAt: string;
  finishedAt?: string;
}

/** GET /templates/{templateID}: E2B's TemplateWithBuilds. */
export interface E2bTemplateDetail {
  templateID: string;
  aliases: string[];
  names: string[];
  public: boolean;
  createdAt: string;
  updatedAt: string;
  builds: E2bBuild[];
}

export interface TemplateTag { tag: string; buildID: string; createdAt: string }

/** svc's own view of a template (GET /svc/template...): what E2B's shape lacks (runtime, source, size, error). */
export interface SvcTemplate {
  template_id: string;
  alias: string | null;
  status: 'building' | 'ready' | 'failed';
  source_kind: string;
  source_image_ref: string;
  image_info: { layers: number; sizeBytes: number } | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  error: string | null;
  start_cmd?: string | null;
  ready_cmd?: string | null;
  runtime?: string | null;
}

export interface LogEntry { timestamp: string; level: 'debug' | 'info' | 'warn' | 'error'; message: string }

/** GET /templates/{id}/builds/{buildID}/status. */
export interface BuildStatusAnswer {
  templateID: string;
  buildID: string;
  status: BuildStatus;
  logEntries: LogEntry[];
  reason?: { message: string; step?: string };
}

/** The name a person knows a template by: its first alias, else its id. */
export function templateName(t: { templateID: string; aliases: string[] }): string {
  return t.aliases[0] ?? t.templateID;
}

/** The status route's page size (the master answers at most 100 entries a call). */
export const LOG_PAGE = 100;

export function buildStatus(api: Api, templateId: string, buildId: string, logsOffset: number, limit = LOG_PAGE): Promise<BuildStatusAnswer> {
  return api.get<BuildStatusAnswer>(`/templates/${encodeURIComponent(templateId)}/builds/${encodeURIComponent(buildId)}/status`, { logsOffset, limit });
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge ${status}`}>{status}</span>;
}
