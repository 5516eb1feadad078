import type { Identity } from './identity.ts';
import type { Route } from './router.ts';

/** What every page gets: who is signed in (with the API client of their key) and the route. */
export interface PageProps {
  id: Identity;
  route: Route;
}
