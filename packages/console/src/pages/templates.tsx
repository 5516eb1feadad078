import type { PageProps } from '../page-props.ts';

export function TemplatesPage(_props: PageProps) {
  return <h1>TemplatesPage</h1>;
}
