import type { PageProps } from '../page-props.ts';

export function VolumesPage(_props: PageProps) {
  return <h1>VolumesPage</h1>;
}
