import type { PageProps } from '../page-props.ts';

export function SandboxesPage(_props: PageProps) {
  return <h1>SandboxesPage</h1>;
}
