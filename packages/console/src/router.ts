import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (`#/sandboxes/<id>`): the API serves one page at /dashboard and every view is a
 * link that reloads, bookmarks and goes back as a user expects.
 */
export interface Route {
  /** The path's parts after `#/`: ['sandboxes', 'abc']. */
  parts: string[];
  query: URLSearchParams;
  /** The path is no link the console makes (a malformed %-escape): the not-found view. */
  invalid?: boolean;
}

/** The route of a location's hash (`#/sandboxes/abc?x=1`). */
export function parseHash(hash: string): Route {
  const [path, q] = hash.replace(/^#\/?/, '').split('?', 2);
  const query = new URLSearchParams(q ?? '');
  try {
    return { parts: (path ?? '').split('/').filter(Boolean).map(decodeURIComponent), query };
  } catch (err) {
    // decodeURIComponent's URIError (`#/sandboxes/%`): thrown from the first render, it blanked
    // the whole console; the address is one no link makes, so it is a page not found.
    if (!(err instanceof URIError)) throw err;
    return { parts: [], query, invalid: true };
  }
}

function current(): Route {
  return parseHash(location.hash);
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
