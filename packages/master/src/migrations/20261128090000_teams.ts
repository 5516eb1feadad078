import type { Migration } from '../db/migrator.ts';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';

export const migration: Migration = {
  name: '20261128090000_teams',
  steps: [
    {
      op: 'createTable', table: 't_svc_team', columns: [
        { name: 'team_id', type: 'id', primaryKey: true },
        { name: 'name', type: 'string' },
        { name: 'is_default', type: 'bool' },
        // TeamLimits as JSON (0: no limit).
        { name: 'limits', type: 'text' },
        { name: 'created_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_team', name: 'u_svc_team_name', columns: ['name'], unique: true },
    {
      op: 'createTable', table: 't_svc_api_key', columns: [
        { name: 'key_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'name', type: 'string' },
        // SHA-256 of the key (docs/security.md): the key itself is shown once and never stored.
        { name: 'key_hash', type: 'string' },
        { name: 'mask', type: 'text' },
        { name: 'created_at', type: 'bigint' },
        { name: 'last_used_at', type: 'bigint', nullable: true },
        { name: 'revoked_at', type: 'bigint', nullable: true },
      ],
    },
    { op: 'createIndex', table: 't_svc_api_key', name: 'u_svc_api_key_hash', columns: ['key_hash'], unique: true },
    { op: 'createIndex', table: 't_svc_api_key', name: 'i_svc_api_key_team', columns: ['team_id'] },
    // Everything made before teams is the default team's.
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'team_id', type: 'id', default: DEFAULT_TEAM_ID } },
    { op: 'createIndex', table: 't_svc_sandbox', name: 'i_svc_sandbox_team', columns: ['team_id', 'state'] },
    // E2B's iam.tokens as JSON: the workload tokens the egress proxy may mint for it (docs/security.md).
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'iam', type: 'text', nullable: true } },
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'team_id', type: 'id', default: DEFAULT_TEAM_ID } },
    { op: 'addColumn', table: 't_svc_template', column: { name: 'team_id', type: 'id', default: DEFAULT_TEAM_ID } },
    // 1: every team may start sandboxes from it (svc up's base templates); only its team changes it.
    // Templates from before teams were every key's to use, and stay usable by every team.
    { op: 'addColumn', table: 't_svc_template', column: { name: 'public', type: 'bool', default: true } },
    { op: 'addColumn', table: 't_svc_build', column: { name: 'team_id', type: 'id', default: DEFAULT_TEAM_ID } },
  ],
};
