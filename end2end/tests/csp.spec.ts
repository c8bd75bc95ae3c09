import { expect, test, type Page } from '@playwright/test';
import { admin } from '../playwright.config';

// The pages run under a strict Content-Security-Policy (own script by nonce, own WebAssembly,
// nothing else). A policy that blocked something Leptos needs would leave the page rendered
// but dead, so these tests watch for every violation and console error while the page
// hydrates, signs in through a server function, and signs out.

/** Collects CSP violations, console errors and uncaught exceptions of the page. */
async function watchForProblems(page: Page): Promise<string[]> {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  await page.exposeFunction('reportCspViolation', (violation: string) =>
    problems.push(`CSP violation: ${violation}`),
  );
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      const report = (window as unknown as { reportCspViolation: (v: string) => void })
        .reportCspViolation;
      report(`${event.effectiveDirective} blocked ${event.blockedURI || 'inline'}`);
    });
  });
  return problems;
}

test('the login page hydrates under its Content-Security-Policy without a violation', async ({ page }) => {
  const problems = await watchForProblems(page);
  const response = await page.goto('/login');
  const policy = response?.headers()['content-security-policy'] ?? '';
  expect(policy).toContain("default-src 'self'");
  expect(policy).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9_-]+' 'wasm-unsafe-eval'/);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByRole('button', { name: 'Sign in' })).toBeEnabled();
  expect(problems).toEqual([]);
});

test('signing in and out under the policy raises no violation', async ({ page }) => {
  const problems = await watchForProblems(page);
  await page.goto('/login');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await page.getByLabel('Username').fill(admin.username);
  await page.getByLabel('Password').fill(admin.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login$/);
  expect(problems).toEqual([]);
});

test('a script injected without the nonce is blocked and reported', async ({ page }) => {
  // Proves the watcher above can see a violation, so its silence means something.
  const problems = await watchForProblems(page);
  await page.goto('/login');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await page.evaluate(() => {
    const script = document.createElement('script');
    script.textContent = 'window.injected = true';
    document.body.append(script);
  });
  await expect.poll(() => problems.some((p) => p.includes('CSP violation: script-src'))).toBe(true);
  expect(await page.evaluate(() => (window as unknown as { injected?: boolean }).injected)).toBeUndefined();
});
