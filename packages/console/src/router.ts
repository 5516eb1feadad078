import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (`#/sandboxes/<id>`): the API serves one page at /dashboard and every view is a
 * link that reloads, bookmarks and goes back as a user expects.
 */
export interface Route {
  /** The path's parts after `#/`: ['sandboxes', 'abc']. */
  parts: string[];
  query: URLSearchParams;
}

function current(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, q] = hash.split('?', 2);
  return { parts: (path ?? '').split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? '') };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const on = () => setRoute(current());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** The href of a view: href('sandboxes', id). */
export function href(...parts: string[]): string {
  return `#/${parts.map(encodeURIComponent).join('/')}`;
}
