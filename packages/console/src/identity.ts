import { Api, ApiError } from './api.ts';

/** Who a key is: its team (E2B's GET /teams answers the key's own; the admin key's is the default team) and whether it is the admin key. */
export interface Identity {
  api: Api;
  teamId: string;
  teamName: string;
  admin: boolean;
}

interface WireTeam { teamID: string; name: string; isDefault: boolean; apiKey: string }

/** Checks a key against the API: a wrong key is the API's 401, which the sign-in form shows. */
export async function identify(key: string): Promise<Identity> {
  const api = new Api(key);
  const teams = await api.get<WireTeam[]>('/teams');
  const own = teams.find((t) => t.apiKey === key) ?? (teams.length === 1 ? teams[0] : teams.find((t) => t.isDefault)) ?? teams[0];
  if (!own) throw new ApiError(403, 'no_team', 'this key belongs to no team');
  // The operator's routes answer the admin key only (a team key gets 403).
  const admin = await api.get('/nodes').then(() => true, (err) => {
    if (err instanceof ApiError && err.status === 403) return false;
    throw err;
  });
  return { api, teamId: own.teamID, teamName: own.name, admin };
}
