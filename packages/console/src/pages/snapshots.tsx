import type { PageProps } from '../page-props.ts';

export function SnapshotsPage(_props: PageProps) {
  return <h1>SnapshotsPage</h1>;
}
