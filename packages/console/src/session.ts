/**
 * The signed-in key, kept for the browser session only (sessionStorage: a new window or a closed
 * browser signs in again, and no other site can read it).
 */
const KEY = 'svc.console.apiKey';

export function savedKey(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function saveKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}
