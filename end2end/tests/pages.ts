// What the specs of the signed-in pages share: watching the console of a page, and opening a
// page once its content (not only <html>) has hydrated.
import { expect, type Page } from '@playwright/test';
import { openHydrated } from './support';

/** Console errors and uncaught exceptions of the page from now on. Specs start watching once
 * their own page is open: the overview, where signing in lands, is another page's business. */
export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  return errors;
}

/** Opens a signed-in page and waits until its content has hydrated too (which happens after
 * <html> is marked): the live indicator turning "Live" shows it, and that changes will arrive. */
export async function openLive(page: Page, path: string) {
  await openHydrated(page, path);
  await expect(page.getByTestId('live-indicator')).toHaveText('Live');
}
