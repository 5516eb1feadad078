/**
 * Node label rules (docs/cluster.md "Placement"), shared by the master (its label routes, a
 * node's registration, a create's nodeSelector) and the node agent (node_agent.labels at start).
 */
import { badRequest } from '@svc/common';

export const MAX_LABELS_PER_NODE = 64;

/** A name as error messages quote it: never the whole of an oversized input. */
const shown = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…` : s);

/** Namespaces that belong to the orchestrator convention and to the platform itself. */
const RESERVED_PREFIXES = ['kubernetes.io', 'k8s.io', 'svc.io'];

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Label names follow the orchestrator convention: `[dns-1123-subdomain/]name`. */
export function checkLabelName(full: string): void {
  if (typeof full !== 'string' || full.length === 0) throw badRequest('label name must be a non-empty string');
  const slash = full.indexOf('/');
  const prefix = slash >= 0 ? full.slice(0, slash) : '';
  const name = slash >= 0 ? full.slice(slash + 1) : full;
  if (slash >= 0) {
    if (prefix.length === 0 || prefix.length > 253 || !prefix.split('.').every((p) => DNS1123_LABEL.test(p) && p.length <= 63)) {
      throw badRequest(`label ${shown(full)}: prefix must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')`);
    }
    for (const r of RESERVED_PREFIXES) {
      if (prefix === r || prefix.endsWith(`.${r}`)) throw badRequest(`label ${shown(full)}: the ${r} namespace is reserved`);
    }
  }
  if (name.length === 0 || name.length > 63 || !NAME.test(name)) {
    throw badRequest(`label ${shown(full)}: name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`);
  }
}

export function checkLabelValue(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string') throw badRequest(`label ${shown(name)}: value must be a string`);
  if (value.length > 63 || (value !== '' && !NAME.test(value))) {
    throw badRequest(`label ${shown(name)}: value must be empty or 1-63 characters of letters, digits, '-', '_' and '.'`);
  }
}

/** Every name and value of `labels` (an object of strings) checked: 400 naming the first bad one. */
export function checkLabels(labels: unknown, what: string): Record<string, string> {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) throw badRequest(`${what} must be an object of label name to value`);
  const entries = Object.entries(labels as Record<string, unknown>);
  if (entries.length > MAX_LABELS_PER_NODE) throw badRequest(`${what} has ${entries.length} labels; at most ${MAX_LABELS_PER_NODE}`);
  for (const [k, v] of entries) { checkLabelName(k); checkLabelValue(k, v); }
  return labels as Record<string, string>;
}

/** `name=value,name2=value2` (node_agent.labels, --node-selector) as an object; names and values checked. */
export function parseLabelList(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw badRequest(`${what}: ${JSON.stringify(part)} is not name=value`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return checkLabels(out, what);
}

/** Whether a node's labels hold every name=value of the selector. */
export function matchesSelector(labels: Record<string, string>, selector: Record<string, string> | undefined): boolean {
  return !selector || Object.entries(selector).every(([k, v]) => labels[k] === v);
}
