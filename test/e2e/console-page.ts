/**
 * How the console's browser tests (and its bench and screenshots) read a page: by the names and
 * roles of docs/console.md's UI contract only, never by the page's CSS classes, so a restyled page
 * keeps its tests and a test that fails names what a person (or a screen reader) would miss.
 */
import type { Locator, Page } from 'playwright-core';

/** The value of a fact of a page's `<dl>` (the sandbox page's "State", a build's "Status"). */
export function fact(page: Page | Locator, name: string): Locator {
  return page.locator(`xpath=//dt[normalize-space()="${name}"]/following-sibling::dd[1]`).first();
}

/** A table named by its caption or aria-label. */
export function table(page: Page | Locator, name: string): Locator {
  return page.getByRole('table', { name, exact: true });
}

/** A region (a Section) named by its heading. */
export function region(page: Page | Locator, name: string): Locator {
  return page.getByRole('region', { name, exact: true });
}

/** The row of a table whose cells hold a link named `linkName` (a sandbox's id). */
export function rowWithLink(t: Locator, linkName: string): Locator {
  return t.getByRole('row').filter({ has: t.page().getByRole('link', { name: linkName, exact: true }) });
}

/** The text of a row's cell under the column headed `column`. */
export async function cellText(t: Locator, row: Locator, column: string): Promise<string> {
  const headers = (await t.getByRole('columnheader').allInnerTexts()).map((h) => h.trim());
  const i = headers.indexOf(column);
  if (i < 0) throw new Error(`table has no column "${column}" (columns: ${headers.join(', ')})`);
  return (await row.getByRole('cell').nth(i).innerText()).trim();
}

/** The element the terminal draws in (aria-label "Terminal"), not the xterm's own input inside it. */
export function terminal(page: Page): Locator {
  return page.locator('[aria-label="Terminal"]').first();
}

/** What the terminal shows: the text of xterm's rows (its DOM renderer), else of the whole element. */
export async function terminalText(page: Page): Promise<string> {
  return terminal(page).evaluate((el) => {
    const rows = el.querySelector('.xterm-rows') ?? el;
    return [...rows.children].map((r) => r.textContent ?? '').join('\n') || (el.textContent ?? '');
  });
}

/**
 * The page's own errors on the sign-in form: the browser logs the API's 401 to a refused key's
 * check (GET /svc/whoami) as "Failed to load resource", which is the answer the form shows, not a fault.
 */
export function signInErrors(errors: string[]): string[] {
  return errors.filter((e) => !/Failed to load resource: the server responded with a status of 401 .*\(http[^ ]*\/svc\/whoami\)$/.test(e));
}
