import { expect, test } from '@playwright/test';
import { admin, agentApi, screenshot, signIn, unique } from './support';

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

/** The relative luminance of a CSS `rgb(...)` colour (WCAG 2). */
function luminance(color: string): number {
  const [r, g, b] = color.match(/[\d.]+/g)!.slice(0, 3).map((c) => {
    const v = Number(c) / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

test('on a phone each operation is a short card and a long key ends in an ellipsis', async ({ page }) => {
  const { api, namespace } = await agentApi();
  const key = unique('a-long-idempotency-key-for-refund-of-order-2026-12-05-customer-ada-lovelace');
  for (const n of [1, 2]) {
    const claimed = await api.post('/v1/operations', { data: { tool: 'card_tool', key: `${key}-${n}`, args: { n } } });
    expect(claimed.status()).toBe(201);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  await signIn(page, admin.username, admin.password);
  await page.goto(`/operations?namespace=${namespace}`);
  const rows = page.locator('table.operations tbody tr');
  await expect(rows).toHaveCount(2);
  for (const row of await rows.all()) {
    const box = (await row.boundingBox())!;
    expect(box.height, 'a card is a few lines tall, not a tower of letters').toBeLessThanOrEqual(160);
    expect(box.width, 'a card spans the phone').toBeGreaterThan(300);
    // Each cell says what it is.
    await expect(row.locator('td[data-label="Key"]')).toBeVisible();
    const shown = row.locator('td[data-label="Key"] code');
    const look = await shown.evaluate((code) => ({
      overflow: getComputedStyle(code).textOverflow,
      clipped: code.scrollWidth > code.clientWidth,
      height: code.getBoundingClientRect().height,
      lineHeight: Number.parseFloat(getComputedStyle(code).lineHeight) || 20,
    }));
    expect(look.overflow).toBe('ellipsis');
    expect(look.clipped, 'the long key is cut, not wrapped').toBe(true);
    expect(look.height, 'the key is one line').toBeLessThanOrEqual(look.lineHeight * 1.5);
  }
  // The whole key is on the operation's own page.
  await rows.first().getByRole('link').first().click();
  const whole = page.locator('dd code', { hasText: `${key}-` }).first();
  await expect(whole).toBeVisible();
  const full = await whole.innerText();
  expect(full).toMatch(new RegExp(`^${key}-[12]$`));
  await page.goto(`/operations?namespace=${namespace}`);
  await screenshot(page, 'phone-operations-cards');
  await api.dispose();
});

test('in dark mode the charts read: light ticks at body size, a legend, a title per bucket', async ({ page }) => {
  await page.emulateMedia({ colorScheme: 'dark' });
  await signIn(page, admin.username, admin.password);
  await page.goto('/?window=24h');
  const chart = page.locator('figure[data-chart="duplicates"]');
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const surface = await chart.evaluate((figure) => getComputedStyle(figure).backgroundColor);
  for (const tick of [chart.locator('svg.chart-y text.tick').first(), chart.locator('svg.chart-plot text.tick').first()]) {
    const look = await tick.evaluate((text) => ({
      fill: getComputedStyle(text).fill,
      size: Number.parseFloat(getComputedStyle(text).fontSize),
      drawn: text.getBoundingClientRect().height,
    }));
    expect(look.size, 'tick text is at least 12 px').toBeGreaterThanOrEqual(12);
    expect(look.drawn, 'and drawn that large, not scaled down').toBeGreaterThanOrEqual(12);
    for (const behind of [background, surface]) {
      const [light, dark] = [luminance(look.fill), luminance(behind)].sort((a, b) => b - a);
      expect((light + 0.05) / (dark + 0.05), `${look.fill} on ${behind}`).toBeGreaterThanOrEqual(4.5);
      expect(luminance(look.fill)).toBeGreaterThan(luminance(behind));
    }
  }
  // The legend is a list above the plot, never over it.
  const legend = chart.getByRole('list', { name: 'Series' });
  await expect(legend.getByRole('listitem')).toHaveText(['duplicates prevented', 'in flight (409)', 'mismatches (422)']);
  const legendBox = (await legend.boundingBox())!;
  const plotBox = (await chart.locator('svg.chart-plot').boundingBox())!;
  expect(legendBox.y + legendBox.height).toBeLessThanOrEqual(plotBox.y);
  // A title (the hover text) per bucket, as many as the table has rows.
  const buckets = await chart.locator('tbody tr').count();
  expect(buckets).toBeGreaterThanOrEqual(24);
  await expect(chart.locator('rect.bucket title')).toHaveCount(buckets);
  await expect(chart.locator('rect.bucket title').last()).toHaveText(/duplicates prevented: \d+, in flight \(409\): \d+/);
});

test.describe('in another time zone', () => {
  test.use({ timezoneId: 'Asia/Kolkata' });

  test('chart times are the viewer\'s local time, and the page says so', async ({ page }) => {
    await signIn(page, admin.username, admin.password);
    await page.goto('/?window=1h');
    await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
    await expect(page.getByText('Chart times: local (UTC+05:30)')).toBeVisible();
    const tick = page.locator('figure[data-chart="duplicates"] svg.chart-plot text.tick').first();
    const utc = new Date((await tick.getAttribute('datetime'))!);
    const local = new Date(utc.getTime() + 330 * 60_000);
    const clock = `${String(local.getUTCHours()).padStart(2, '0')}:${String(local.getUTCMinutes()).padStart(2, '0')}`;
    await expect(tick).toHaveText(clock);
  });
});
