import type { PageProps } from '../page-props.ts';
import { ApiKeys } from '../components/team-keys.tsx';
import { Usage } from '../components/team-usage.tsx';
import { Webhooks } from '../components/team-webhooks.tsx';

/** The signed-in key's team (the admin key's is the default team): usage, webhooks and API keys. */
export function TeamPage({ id }: PageProps) {
  return (
    <>
      <h1>Team</h1>
      <p class="muted">{id.teamName} <span class="mono">{id.teamId}</span></p>
      <Usage api={id.api} teamId={id.teamId} />
      <Webhooks api={id.api} />
      <ApiKeys api={id.api} />
    </>
  );
}
