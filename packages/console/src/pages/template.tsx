import type { PageProps } from '../page-props.ts';

export function TemplatePage({ templateId }: PageProps & { templateId: string; buildId?: string }) {
  return <h1>{templateId}</h1>;
}
