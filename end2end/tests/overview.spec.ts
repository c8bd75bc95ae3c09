import { expect, test, type Page } from '@playwright/test';
import { admin, agentApi, registerTool, screenshot, signIn, unique } from './support';

// The number a tile shows, e.g. "Awaiting approval" → 3.
async function tile(page: Page, name: string): Promise<number> {
  const text = await page.getByTestId(`tile-${name.toLowerCase().replaceAll(' ', '-')}`).innerText();
  return Number.parseInt(text, 10);
}

test('the overview counts what the test did, draws it, and moves without a reload', async ({ page }) => {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });

  // An agent completes an operation, repeats it twice (two replays) and reuses its key with
  // other arguments (one mismatch).
  const { api } = await agentApi();
  const key = unique('overview');
  const claim = { tool: 'overview_tool', key, args: { n: 1 } };
  const first = await api.post('/v1/operations', { data: claim });
  expect(first.status()).toBe(201);
  const { operation, lease } = await first.json();
  const done = await api.post(`/v1/operations/${operation.id}/complete`, {
    data: { lease_token: lease.token, outcome: 'succeeded', result: { ok: true } },
  });
  expect(done.status()).toBe(200);
  for (let i = 0; i < 2; i++) {
    expect((await api.post('/v1/operations', { data: claim })).status()).toBe(200);
  }
  expect((await api.post('/v1/operations', { data: { ...claim, args: { n: 2 } } })).status()).toBe(422);

  await signIn(page, admin.username, admin.password);
  await page.goto('/?window=1h');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByRole('link', { name: '1h' })).toHaveAttribute('aria-current', 'true');
  await expect(page.getByTestId('live-indicator')).toHaveText('Live');
  await expect.poll(() => tile(page, 'Duplicates prevented')).toBeGreaterThanOrEqual(2);

  // Each chart is an SVG with a hover title per bucket, and a table with exact values.
  for (const id of ['duplicates', 'stuck', 'latency', 'interventions']) {
    const chart = page.locator(`figure[data-chart="${id}"]`);
    await expect(chart.locator('svg.chart-plot')).toBeVisible();
    await expect(chart.locator('rect.bucket title')).toHaveCount(12); // 1 h in 5-minute buckets
  }
  // Stuck unknowns over time, beside the number, which says the threshold (IDEM_STUCK_AFTER).
  const stuckChart = page.locator('figure[data-chart="stuck"]');
  await expect(stuckChart.locator('figcaption')).toHaveText('Stuck unknowns');
  await expect(stuckChart.locator('rect.bucket title').last()).toHaveText(/stuck unknowns: \d+/);
  await expect(page.locator('a.tile', { hasText: 'Stuck unknowns' })).toContainText('unknown for more than 15 minutes');
  const duplicates = page.locator('figure[data-chart="duplicates"]');
  const latest = duplicates.locator('rect.bucket title').last();
  await expect(latest).toHaveText(/duplicates prevented: [1-9]/);
  await duplicates.getByText('Show as a table').click();
  await expect(duplicates.locator('tbody tr')).toHaveCount(12);
  await expect(duplicates.locator('tbody tr').last()).toContainText(/[1-9]/);

  // A new approval request moves the counter with no reload.
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));
  const waitingBefore = await tile(page, 'Awaiting approval');
  const irreversible = unique('wipe');
  await registerTool(irreversible, { effect: 'irreversible' });
  const request = await api.post('/v1/operations', {
    data: { tool: irreversible, key: unique('approval'), args: { target: 'db' } },
  });
  expect(request.status()).toBe(202);
  await expect.poll(() => tile(page, 'Awaiting approval')).toBe(waitingBefore + 1);
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);

  await screenshot(page, 'overview');
  await api.dispose();
  expect(errors).toEqual([]);
});

test('the overview switches windows through its URL', async ({ page }) => {
  await signIn(page, admin.username, admin.password);
  await page.getByRole('link', { name: '7d' }).click();
  await expect(page).toHaveURL(/window=7d/);
  await expect(page.getByRole('link', { name: '7d' })).toHaveAttribute('aria-current', 'true');
  // 7 days in 6-hour buckets.
  await expect(page.locator('figure[data-chart="duplicates"] rect.bucket title')).toHaveCount(28);
});

test('the table by tool counts a namespace\'s tool and links each number to its operations', async ({ page }) => {
  const { api, namespace } = await agentApi();
  const tool = unique('bytool');
  const claims = [];
  for (const key of [unique('a'), unique('b')]) {
    const answer = await api.post('/v1/operations', { data: { tool, key, args: { key } } });
    expect(answer.status(), await answer.text()).toBe(201);
    claims.push(await answer.json());
  }
  const failed = await api.post(`/v1/operations/${claims[0].operation.id}/complete`, {
    data: { lease_token: claims[0].lease.token, outcome: 'failed', error: { code: 'declined', message: 'no' } },
  });
  expect(failed.status(), await failed.text()).toBe(200);

  await signIn(page, admin.username, admin.password);
  await page.goto('/?window=24h');
  const row = page.locator(`table.by-tool tr[data-namespace="${namespace}"][data-tool="${tool}"]`);
  await expect(row.locator('td[data-label="Operations"]')).toHaveText('2');
  await expect(row.locator('td[data-label="Failures"]')).toHaveText('1');
  await expect(row.locator('td[data-label="Failures"]')).toHaveClass(/alert/);
  await expect(row.locator('td[data-label="Unknown now"]')).toHaveText('0');

  await row.locator('td[data-label="Operations"] a').click();
  await expect(page).toHaveURL(new RegExp(`/operations\\?.*namespace=${namespace}.*since=`));
  await expect(page.locator('table.operations tbody tr')).toHaveCount(2);
  await expect(page.getByLabel('Tool')).toHaveValue(tool);

  await page.goBack();
  await row.locator('td[data-label="Failures"] a').click();
  await expect(page).toHaveURL(/status=failed/);
  await expect(page.locator('table.operations tbody tr')).toHaveCount(1);
  await expect(page.locator('table.operations tbody tr [data-status]')).toHaveText('failed');
  await api.dispose();
});
