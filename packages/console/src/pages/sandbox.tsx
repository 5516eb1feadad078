import type { PageProps } from '../page-props.ts';

export function SandboxPage({ sandboxId }: PageProps & { sandboxId: string }) {
  return <h1>{sandboxId}</h1>;
}
