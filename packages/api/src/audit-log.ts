import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '@svc/common';

/** One mutating call: who (key id and team), what, which resource, and how it ended. Never a body. */
export interface ApiAuditRecord {
  ts: string;
  type: 'api_call';
  key_id: string | null;
  team_id: string | null;
  method: string;
  /** The route's pattern (`/sandboxes/:sandboxID`), and the path it was called with. */
  route: string;
  path: string;
  /** The resource the route names (its id parameter), when it names one. */
  resource: string | null;
  status: number;
  source: string;
  duration_ms: number;
}

/**
 * The API's audit log (docs/security.md, "Audit"): JSON Lines, mode 0600, beside the egress
 * proxy's. A write that fails is logged, and the call it records is not failed for it.
 */
export class ApiAuditLog {
  private readonly out: WriteStream;
  constructor(path: string, private readonly logger: Logger) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    this.out = createWriteStream(path, { flags: 'a', mode: 0o600 });
    this.out.on('error', (err) => logger.error({ path, err: err.message }, 'the API audit log cannot be written'));
  }

  write(record: ApiAuditRecord): void {
    this.out.write(JSON.stringify(record) + '\n');
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.out.end(resolve));
  }
}
