import { expect, test, type Locator, type Page } from '@playwright/test';
import { admin, agentApi, createPerson, registerTool, screenshot, signIn, unique } from './support';

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

/** How far the page, and the box around `table`, scroll sideways (0 or less: not at all). */
async function sidewaysScroll(page: Page, table: Locator) {
  const pageOverflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  const tableOverflow = await table.evaluate((t) => t.parentElement!.scrollWidth - t.parentElement!.clientWidth);
  return { pageOverflow, tableOverflow };
}

/** The text a person reads in `row` (cells' own text and their labels): its size, and its
 * contrast against the background it is drawn on. */
async function textLooks(row: Locator) {
  return row.evaluate((tr) => {
    const channels = (color: string) => color.match(/[\d.]+/g)!.map(Number);
    const luminance = (color: string) => {
      const [r, g, b] = channels(color).slice(0, 3).map((c) => {
        const v = c / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const backdrop = (element: Element) => {
      for (let at: Element | null = element; at; at = at.parentElement) {
        const color = getComputedStyle(at).backgroundColor;
        const alpha = channels(color)[3] ?? 1;
        if (alpha > 0.5) return color;
      }
      return getComputedStyle(document.body).backgroundColor;
    };
    const contrast = (text: string, behind: string) => {
      const [light, dark] = [luminance(text), luminance(behind)].sort((a, b) => b - a);
      return (light + 0.05) / (dark + 0.05);
    };
    const looks: { text: string; size: number; contrast: number }[] = [];
    for (const cell of tr.querySelectorAll('td, th')) {
      const label = getComputedStyle(cell, '::before');
      if (label.content !== 'none' && label.content !== 'normal' && label.display !== 'none') {
        looks.push({
          text: `label ${label.content}`,
          size: Number.parseFloat(label.fontSize),
          contrast: contrast(label.color, backdrop(cell)),
        });
      }
    }
    // Disabled controls are dimmed on purpose (and exempt from contrast rules).
    for (const element of tr.querySelectorAll('*:not(:disabled, :disabled *, option, select *)')) {
      const own = [...element.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.trim());
      if (!own || !(element as HTMLElement).offsetParent) continue;
      const style = getComputedStyle(element);
      looks.push({
        text: element.textContent!.trim().slice(0, 40),
        size: Number.parseFloat(style.fontSize),
        contrast: contrast(style.color, backdrop(element)),
      });
    }
    return looks;
  });
}

/** On a 390 px phone, each of `rows` is a card across the phone no taller than `tallest`, its
 * text legible, its buttons on the screen and clickable; nothing scrolls sideways. */
async function expectCards(page: Page, table: Locator, rows: Locator[], tallest: number) {
  const { pageOverflow, tableOverflow } = await sidewaysScroll(page, table);
  expect(pageOverflow, 'the page does not scroll sideways').toBeLessThanOrEqual(0);
  expect(tableOverflow, 'nor does the table').toBeLessThanOrEqual(0);
  for (const row of rows) {
    await row.scrollIntoViewIfNeeded();
    const box = (await row.boundingBox())!;
    expect(box.height, 'a card is a few lines tall').toBeLessThanOrEqual(tallest);
    expect(box.width, 'a card spans the phone').toBeGreaterThan(300);
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    for (const look of await textLooks(row)) {
      expect(look.size, `"${look.text}" is legible`).toBeGreaterThanOrEqual(12);
      expect(look.contrast, `"${look.text}" stands out from its background`).toBeGreaterThanOrEqual(4.5);
    }
    const buttons = await row.getByRole('button').all();
    for (const button of buttons) {
      await button.scrollIntoViewIfNeeded();
      const at = (await button.boundingBox())!;
      const name = await button.innerText();
      expect(at.x, `${name} starts on the screen`).toBeGreaterThanOrEqual(0);
      expect(at.x + at.width, `${name} ends on the screen`).toBeLessThanOrEqual(390);
      expect(at.height, `${name} is big enough to tap`).toBeGreaterThanOrEqual(24);
      // Clickable: visible, enabled, and nothing covers it.
      if (await button.isEnabled()) await button.click({ trial: true });
    }
  }
}

for (const colorScheme of ['light', 'dark'] as const) {
  test.describe(`on a phone in ${colorScheme} mode`, () => {
    test.use({ viewport: { width: 390, height: 844 }, colorScheme });

    test('each tool is a card whose fields wrap and whose Edit button is within reach', async ({ page }) => {
      const [plain, busy] = [unique('plain_tool'), unique('busy_tool')];
      await registerTool(plain, { effect: 'read_only' });
      await registerTool(busy, {
        effect: 'non_idempotent_write',
        key_fields: ['order_id', 'customer.account_number'],
        ignore_fields: ['reason', 'request.trace_id'],
        redact_fields: ['card.number'],
        executor: {
          url: `http://127.0.0.1:9/a/rather/long/executor/path/for/${busy}/that/would/not/fit`,
          reconcile_url: `http://127.0.0.1:9/a/rather/long/lookup/path/for/${busy}`,
          timeout_ms: 5000,
        },
      });
      await signIn(page, admin.username, admin.password);
      await page.goto('/tools');
      await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
      const table = page.locator('table.tools');
      const row = (tool: string) => table.locator(`tbody tr[data-tool="${tool}"]`);
      for (const tool of [plain, busy]) {
        await expect(row(tool).getByRole('button', { name: `Edit ${tool}` })).toBeVisible();
      }
      // The whole executor is there, wrapped, not cut.
      await expect(row(busy).locator('td[data-label="Executor"]')).toContainText('/that/would/not/fit');
      await expectCards(page, table, [row(plain)], 260);
      await expectCards(page, table, [row(busy)], 500);
      await screenshot(page, `phone-tools-${colorScheme}`);
    });

    test('each person and each API key is a card with its buttons within reach', async ({ page }) => {
      const person = await createPerson('operator');
      const { api, namespace } = await agentApi();
      await api.dispose();
      await signIn(page, admin.username, admin.password);
      await page.goto('/admin');
      await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
      const people = page.locator('table.users');
      const personRow = people.locator(`tbody tr[data-user="${person.username}"]`);
      for (const name of ['Change role', 'Disable', 'Delete']) {
        await expect(personRow.getByRole('button', { name })).toBeVisible();
      }
      await expectCards(page, people, [personRow], 260);
      const keys = page.locator('table.api-keys');
      const keyRow = keys.locator('tbody tr').filter({ hasText: namespace });
      await expect(keyRow.getByRole('button', { name: 'Revoke' })).toBeVisible();
      await expectCards(page, keys, [keyRow], 220);
      await screenshot(page, `phone-admin-${colorScheme}`);
    });

    test('the by-tool cards label each number in the body\'s weight', async ({ page }) => {
      const { api } = await agentApi();
      const claimed = await api.post('/v1/operations', { data: { tool: unique('by_tool'), key: unique('k'), args: {} } });
      expect(claimed.status()).toBe(201);
      await api.dispose();
      await signIn(page, admin.username, admin.password);
      await page.goto('/?window=1h');
      const header = page.locator('table.by-tool tbody th').first();
      await expect(header).toBeVisible();
      const weights = await header.evaluate((th) => ({
        label: getComputedStyle(th, '::before').fontWeight,
        name: getComputedStyle(th).fontWeight,
        number: getComputedStyle(th.parentElement!.querySelector('td.num')!, '::before').fontWeight,
      }));
      expect(weights.label, 'the "Tool" label is not bold').toBe(weights.number);
      expect(Number(weights.name), 'the tool\'s name is').toBeGreaterThan(Number(weights.label));
    });
  });
}
