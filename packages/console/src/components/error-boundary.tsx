// Preact's JSX, said here too, not only in the console's tsconfig: its unit test runs under the root one.
/** @jsxRuntime automatic */
/** @jsxImportSource preact */
import { Component, type ComponentChildren } from 'preact';

interface Props {
  children: ComponentChildren;
}

interface State {
  error?: string;
}

/**
 * A view that throws while rendering shows what failed and a way back instead of a blank page
 * (Preact unmounts the whole tree on an uncaught render error). Moving to another route (the link,
 * the back button) renders the children again.
 */
export class ErrorBoundary extends Component<Props, State> {
  override state: State = {};

  static override getDerivedStateFromError(err: unknown): State {
    return { error: err instanceof Error ? err.message : String(err) };
  }

  private readonly onHashChange = () => {
    if (this.state.error !== undefined) this.setState({ error: undefined });
  };

  override componentDidMount(): void {
    addEventListener('hashchange', this.onHashChange);
  }

  override componentWillUnmount(): void {
    removeEventListener('hashchange', this.onHashChange);
  }

  override componentDidCatch(err: unknown): void {
    // the page shows the message; the stack is for whoever opens the browser's console
    console.error('svc console: a view failed to render', err);
  }

  override render() {
    if (this.state.error === undefined) return this.props.children;
    return <FailedView message={this.state.error} />;
  }
}

/** What a failed view shows. */
function FailedView({ message }: { message: string }) {
  return (
    <div role="alert">
      <p class="error">This page failed: {message}</p>
      <p><a href="#/sandboxes">Back to the sandboxes</a></p>
    </div>
  );
}

/** The view of an address no link of the console makes. */
export function NotFoundView() {
  return (
    <div role="alert">
      <p class="error">No such page: this address is not one the console makes.</p>
      <p><a href="#/sandboxes">Back to the sandboxes</a></p>
    </div>
  );
}
