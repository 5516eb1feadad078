/**
 * Reading one server's entry of `--config`: each check throws a ConfigError whose message names
 * the server and the field, the one line the SDK shows as "Failed to start MCP gateway: ...".
 */

/** A config the gateway refuses: its message is printed as is, and the exit code is 1. */
export class ConfigError extends Error {}

export type Entry = Record<string, unknown>;

/** What a value is, for a refusal: `null`, `an array`, `a string`... */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

export function asEntry(server: string, value: unknown): Entry {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`MCP server '${server}': its config must be an object, got ${describe(value)}`);
  }
  return value as Entry;
}

export function optionalString(server: string, entry: Entry, field: string): string | undefined {
  const value = entry[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ConfigError(`MCP server '${server}': '${field}' must be a string, got ${describe(value)}`);
  return value;
}

export function requiredString(server: string, entry: Entry, field: string, what: string): string {
  const value = optionalString(server, entry, field);
  if (!value) throw new ConfigError(`MCP server '${server}': '${field}' is required (${what})`);
  return value;
}

export function optionalBoolean(server: string, entry: Entry, field: string): boolean | undefined {
  const value = entry[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw new ConfigError(`MCP server '${server}': '${field}' must be true or false, got ${describe(value)}`);
  return value;
}

export function optionalStringList(server: string, entry: Entry, field: string): string[] | undefined {
  const value = entry[field];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) {
    throw new ConfigError(`MCP server '${server}': '${field}' must be a list of non-empty strings`);
  }
  return value as string[];
}

export function requiredStringList(server: string, entry: Entry, field: string, what: string): string[] {
  const value = optionalStringList(server, entry, field);
  if (!value || value.length === 0) throw new ConfigError(`MCP server '${server}': '${field}' is required (${what})`);
  return value;
}

export function optionalStringMap(server: string, entry: Entry, field: string): Record<string, string> {
  const value = entry[field];
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value) || Object.values(value).some((v) => typeof v !== 'string')) {
    throw new ConfigError(`MCP server '${server}': '${field}' must be an object of strings`);
  }
  return value as Record<string, string>;
}

/** A catalog field as an environment variable's value: strings, numbers and booleans as written, lists joined by commas. */
export function envValue(server: string, field: string, value: unknown): string {
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' || typeof v === 'number')) return value.join(',');
  throw new ConfigError(`MCP server '${server}': '${field}' must be a string, a number, a boolean or a list, got ${describe(value)}`);
}
