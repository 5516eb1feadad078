import { render } from 'preact';
import { App } from './app.tsx';
import { ErrorBoundary } from './components/error-boundary.tsx';
import './styles.css';

const root = document.getElementById('app')!;
// The page's "Loading…" line goes: render adds to what the element holds.
root.textContent = '';
// A failure outside any page (the header, signing in) still shows a message and a way back.
render(<ErrorBoundary><App /></ErrorBoundary>, root);
