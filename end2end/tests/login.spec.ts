import { expect, test, type Page } from '@playwright/test';
import { admin } from '../playwright.config';

// Clicks before hydration would submit the plain HTML form; wait until the WebAssembly
// has taken over the page.
async function openHydrated(page: Page, path: string) {
  await page.goto(path);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}

async function signIn(page: Page, username: string, password: string) {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test('the login page renders its form', async ({ page }) => {
  await openHydrated(page, '/login');
  await expect(page.getByRole('heading', { name: 'idem' })).toBeVisible();
  await expect(page.getByLabel('Username')).toBeVisible();
  await expect(page.getByLabel('Password')).toBeVisible();
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeEnabled();
});

test('a stranger is sent from the overview to the login page', async ({ page }) => {
  await page.goto('/');
  await expect(page).toHaveURL(/\/login$/);
});

test('a wrong password shows an error and stays on the login page', async ({ page }) => {
  await openHydrated(page, '/login');
  await signIn(page, admin.username, 'not the password');
  await expect(page.getByRole('alert')).toHaveText('wrong username or password');
  await expect(page).toHaveURL(/\/login$/);
});

test('the right password reaches the overview without a page reload, and sign-out returns to login', async ({ page }) => {
  await openHydrated(page, '/login');
  // A full page load would wipe this marker; client-side navigation keeps it.
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));

  await signIn(page, admin.username, admin.password);
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByText('Signed in as')).toContainText(admin.username);
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);

  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto('/');
  await expect(page).toHaveURL(/\/login$/);
});

test('"Back" after signing in does not return to the login page', async ({ page }) => {
  await openHydrated(page, '/login');
  await signIn(page, admin.username, admin.password);
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await expect(page).toHaveURL(/\/$/);
  // Sign-in took the login page's place in the history instead of adding an entry after it.
  await page.goBack();
  await expect(page).not.toHaveURL(/\/login/);
});
