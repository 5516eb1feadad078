import type { PageProps } from '../page-props.ts';

export function TeamPage(_props: PageProps) {
  return <h1>TeamPage</h1>;
}
