import { expect, test } from '@playwright/test';
import { admin, screenshot, signIn } from './support';

const pages = ['/', '/operations', '/approvals', '/unknowns', '/tools', '/admin'];

test('every page fits a phone without sideways scrolling and hydrates cleanly', async ({ page }) => {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  await page.setViewportSize({ width: 390, height: 844 });
  await signIn(page, admin.username, admin.password);
  for (const path of pages) {
    await page.goto(path);
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(page.getByRole('heading', { level: 1 })).toBeVisible();
    // Wide tables scroll inside their own box; the page itself never does.
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow, `${path} is wider than the phone`).toBeLessThanOrEqual(0);
  }
  await page.goto('/operations');
  await screenshot(page, 'phone-operations');
  expect(errors).toEqual([]);
});

test('dark mode follows the operating system', async ({ page }) => {
  await page.emulateMedia({ colorScheme: 'dark' });
  await signIn(page, admin.username, admin.password);
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [r, g, b] = background.match(/\d+/g)!.map(Number);
  expect(r + g + b, `body background ${background}`).toBeLessThan(150);
  await screenshot(page, 'dark-overview');

  await page.emulateMedia({ colorScheme: 'light' });
  const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const [lr, lg, lb] = light.match(/\d+/g)!.map(Number);
  expect(lr + lg + lb, `body background ${light}`).toBeGreaterThan(600);
});
