/** A registry failure whose message is meant for the user who asked for the build. */
export class RegistryError extends Error {
  constructor(message: string, readonly status?: number, readonly transient = false) {
    super(message);
    this.name = 'RegistryError';
  }
}

/** The first `errors[].code` of a distribution API error body, if any. */
export function distributionErrorCode(body: string): { code?: string; message?: string } {
  try {
    const doc = JSON.parse(body) as { errors?: Array<{ code?: string; message?: string }> };
    const e = doc.errors?.[0];
    return { code: e?.code, message: e?.message };
  } catch {
    return {};
  }
}
