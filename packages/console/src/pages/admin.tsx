import type { PageProps } from '../page-props.ts';

export function AdminPage(_props: PageProps) {
  return <h1>AdminPage</h1>;
}
