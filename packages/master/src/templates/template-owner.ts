import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import type { Owner } from '../teams/ownership.ts';
import type { TemplateRow } from './tables.ts';

/**
 * Who makes a template: a team (undefined: the operator, on the master's own address, whose
 * templates, svc up's base ones, are public and the default team's). docs/security.md.
 */
export interface TemplateOwner {
  teamId?: string;
}
export const OPERATOR: TemplateOwner = {};

export function ownerColumns(owner: TemplateOwner): { team_id: string; public: number } {
  return owner.teamId === undefined ? { team_id: DEFAULT_TEAM_ID, public: 1 } : { team_id: owner.teamId, public: 0 };
}

export function ownerOf(t: TemplateRow): Owner {
  return { teamId: t.team_id, public: Number(t.public) === 1 };
}
