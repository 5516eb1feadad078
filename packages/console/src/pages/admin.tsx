import type { PageProps } from '../page-props.ts';
import { AdminNodes } from '../components/admin-nodes.tsx';
import { AdminTeams } from '../components/admin-teams.tsx';

/** The operator's view (admin key only; app.tsx routes here for it alone): every team's quotas, and the nodes. */
export function AdminPage({ id }: PageProps) {
  return (
    <>
      <h1>Admin</h1>
      <AdminTeams api={id.api} />
      <AdminNodes api={id.api} />
    </>
  );
}
