// `svc up`: owned by the platform wiring (see docs/development.md). Placeholder until it lands.
export interface UpOptions { dataDir?: string; config?: string; rebuildBase?: boolean; json?: boolean }
export async function runUp(_opts: UpOptions): Promise<void> {
  throw new Error('svc up is not wired yet');
}
