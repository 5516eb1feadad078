import { Api } from './api.ts';

/** Who a key is: its team and whether it is the admin key (GET /svc/whoami, docs/api.md). */
export interface Identity {
  api: Api;
  teamId: string;
  teamName: string;
  admin: boolean;
}

interface WhoAmI { teamId: string; teamName: string; keyId: string | null; admin: boolean }

/** Checks a key against the API: a wrong key is the API's 401, which the sign-in form shows. */
export async function identify(key: string): Promise<Identity> {
  const api = new Api(key);
  const me = await api.get<WhoAmI>('/svc/whoami');
  return { api, teamId: me.teamId, teamName: me.teamName, admin: me.admin };
}
