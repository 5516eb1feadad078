import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';

const root = document.getElementById('app')!;
// The page's "Loading…" line goes: render adds to what the element holds.
root.textContent = '';
render(<App />, root);
