import type { Kysely } from 'kysely';
import type { Logger } from '@svc/common';
import type { Database } from '../db/schema.ts';
import { sealContext as webhookContext } from '../events/webhooks.ts';
import { sealContext as secretContext } from '../secrets/service.ts';
import { sealedAuthOf, withSealedAuth } from '../templates/recipe.ts';
import { resealStale, type ResealReport, type SealedColumn } from './reseal.ts';
import type { Vault } from './vault.ts';

/**
 * Every value the master seals with the vault (docs/security.md, "The vault key"): workload
 * identity signing keys, webhook signature secrets, the secrets' current versions (older versions
 * are never read again) and image templates' registry credentials. A new kind of sealed value
 * belongs here too, or a rotation that drops an old key leaves it unreadable.
 */
function sealedColumns(db: Kysely<Database>): SealedColumn[] {
  return [
    {
      what: 'workload identity signing key',
      list: async () => (await db.selectFrom('t_svc_identity_key').select(['kid', 'private_key_sealed']).execute())
        .map((r) => ({ id: r.kid, sealed: r.private_key_sealed, context: r.kid })),
      replace: async (v, next) => changed(await db.updateTable('t_svc_identity_key').set({ private_key_sealed: next })
        .where('kid', '=', v.id).where('private_key_sealed', '=', v.sealed).executeTakeFirst()),
    },
    {
      what: 'webhook signature secret',
      list: async () => (await db.selectFrom('t_svc_webhook').select(['webhook_id', 'sealed_secret']).execute())
        .map((r) => ({ id: r.webhook_id, sealed: r.sealed_secret, context: webhookContext(r.webhook_id) })),
      replace: async (v, next) => changed(await db.updateTable('t_svc_webhook').set({ sealed_secret: next })
        .where('webhook_id', '=', v.id).where('sealed_secret', '=', v.sealed).executeTakeFirst()),
    },
    {
      what: 'secret value (current version)',
      list: async () => (await db.selectFrom('t_svc_secret as s')
        .innerJoin('t_svc_secret_version as v', (j) => j.onRef('v.secret_id', '=', 's.secret_id').onRef('v.version', '=', 's.current_version'))
        .select(['v.secret_id', 'v.version', 'v.sealed_value']).execute())
        .map((r) => ({ id: `${r.secret_id}:${r.version}`, sealed: r.sealed_value, context: secretContext(r.secret_id, r.version) })),
      replace: async (v, next) => {
        const [secretId = '', version = ''] = v.id.split(':');
        return changed(await db.updateTable('t_svc_secret_version').set({ sealed_value: next })
          .where('secret_id', '=', secretId).where('version', '=', Number(version)).where('sealed_value', '=', v.sealed).executeTakeFirst());
      },
    },
    templateCredentials(db),
  ];
}

/** An image template's registry credentials, inside its stored recipe (templates/recipe.ts). */
function templateCredentials(db: Kysely<Database>): SealedColumn {
  // The recipe each listed value came from, for the compare-and-set of the whole recipe.
  const recipes = new Map<string, string>();
  return {
    what: 'template registry credentials',
    async list() {
      const rows = await db.selectFrom('t_svc_template').select(['template_id', 'request_json']).where('request_json', 'like', '%"sealedAuth"%').execute();
      return rows.flatMap((r) => {
        const auth = r.request_json ? sealedAuthOf(r.request_json, r.template_id) : undefined;
        if (!auth) return [];
        recipes.set(r.template_id, r.request_json!);
        return [{ id: r.template_id, ...auth }];
      });
    },
    async replace(v, next) {
      const old = recipes.get(v.id);
      if (old === undefined) return false;
      return changed(await db.updateTable('t_svc_template').set({ request_json: withSealedAuth(old, next) })
        .where('template_id', '=', v.id).where('request_json', '=', old).executeTakeFirst());
    },
  };
}

function changed(r: { numUpdatedRows: bigint }): boolean {
  return Number(r.numUpdatedRows) > 0;
}

/** At the master's start, before anything opens a sealed value: every stale one sealed anew under the primary key. */
export function resealStaleValues(db: Kysely<Database>, vault: Vault, logger: Logger): Promise<ResealReport> {
  return resealStale(vault, sealedColumns(db), logger);
}
