import { isLoopbackHost } from '@svc/common';

/** A parsed image reference: registry host, repository, and a tag or digest. */
export interface ImageReference {
  /** Host[:port] as written (docker.io for Docker Hub). */
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
}

export const DOCKER_HUB = 'docker.io';

/**
 * Parses "[registry/]repo[:tag][@digest]" the way docker does: the first component is a registry
 * when it has a dot or a port or is "localhost"; Docker Hub names get "library/" when unqualified;
 * no tag and no digest means "latest".
 */
export function parseReference(ref: string): ImageReference {
  const input = ref.trim();
  if (!input || /\s/.test(input)) throw new Error(`invalid image reference ${JSON.stringify(ref)}`);
  let rest = input;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!/^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$/.test(digest)) throw new Error(`invalid digest in image reference ${ref}`);
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!/^[\w][\w.-]{0,127}$/.test(tag)) throw new Error(`invalid tag in image reference ${ref}`);
  }
  let registry = DOCKER_HUB;
  let repository = rest;
  const slash = rest.indexOf('/');
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (first.includes('.') || first.includes(':') || first === 'localhost') {
      registry = first;
      repository = rest.slice(slash + 1);
    }
  }
  if (registry === DOCKER_HUB && !repository.includes('/')) repository = `library/${repository}`;
  if (!/^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/.test(repository)) {
    throw new Error(`invalid repository name in image reference ${ref}`);
  }
  if (!tag && !digest) tag = 'latest';
  return { registry, repository, tag, digest };
}

/** The host the API is served from (Docker Hub's API lives on a different name). */
export function apiHost(registry: string): string {
  return registry === DOCKER_HUB ? 'registry-1.docker.io' : registry;
}

export function formatReference(r: ImageReference): string {
  return `${r.registry}/${r.repository}${r.tag ? `:${r.tag}` : ''}${r.digest ? `@${r.digest}` : ''}`;
}

/** A registry's host without its port (an IPv6 address without its brackets). */
export function registryHost(registry: string): string {
  return registry.startsWith('[') ? registry.slice(1, registry.indexOf(']')) : registry.replace(/:\d+$/, '');
}

/** A registry host (with an optional port) on this machine's loopback: localhost, 127.0.0.0/8, ::1. */
export function isLoopbackRegistry(registry: string): boolean {
  return isLoopbackHost(registryHost(registry));
}
