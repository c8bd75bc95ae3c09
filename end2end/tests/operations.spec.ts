import { expect, test, type APIRequestContext, type APIResponse, type Page } from '@playwright/test';
import { consoleErrors, openLive } from './pages';
import { admin, agentApi, openHydrated, screenshot, signIn, unique } from './support';

// An agent leaves a few operations in its own namespace; an admin finds them through the
// filter, shares the filtered view as a link (the URL holds it), and opens one.

test('operations filter by namespace and status, keep the filter in the URL, and open one', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, namespace } = await agentApi();
  const tool = unique('lookup');
  const keys = [unique('order-a'), unique('order-b'), unique('order-c')];
  const claims = [];
  for (const key of keys) {
    const answer = await api.post('/v1/operations', { data: { tool, key, args: { order: key } } });
    expect(answer.status(), await answer.text()).toBe(201);
    claims.push(await answer.json());
  }
  const done = claims[0];
  const completed = await api.post(`/v1/operations/${done.operation.id}/complete`, {
    data: { lease_token: done.lease.token, outcome: 'succeeded', result: { refund_id: 're_1' } },
  });
  expect(completed.status(), await completed.text()).toBe(200);

  await signIn(page, admin.username, admin.password);
  await openHydrated(page, '/operations');
  await expect(page.getByRole('heading', { name: 'Operations' })).toBeVisible();

  const rows = page.locator('table.operations tbody tr');
  await page.getByLabel('Namespace').fill(namespace);
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(new RegExp(`namespace=${namespace}`));
  await expect(rows).toHaveCount(3);
  // Newest first: the last claim is on top.
  await expect(rows.first()).toContainText(keys[2]);

  await page.getByLabel('Status').selectOption('pending');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/status=pending/);
  await expect(rows).toHaveCount(2);
  await expect(rows.locator('[data-status="pending"]')).toHaveCount(2);

  // The link is the view: a reload (or a colleague opening it) shows the same rows.
  await page.reload();
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(rows).toHaveCount(2);
  await expect(page.getByLabel('Status')).toHaveValue('pending');
  await expect(page.getByLabel('Namespace')).toHaveValue(namespace);

  await page.getByLabel('Status').selectOption('succeeded');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText(keys[0]);
  await screenshot(page, 'operations');

  await rows.first().getByRole('link', { name: tool }).click();
  await expect(page).toHaveURL(new RegExp(`/operations/${done.operation.id}$`));
  await expect(page.getByRole('heading', { level: 1 })).toContainText(tool);
  await expect(page.locator('h1 [data-status]')).toHaveText('succeeded');
  const facts = page.getByTestId('operation-facts');
  await expect(facts).toContainText(keys[0]);
  await expect(facts).toContainText(namespace);
  await expect(page.getByText('re_1')).toBeVisible();
  const timeline = page.locator('ol.timeline li');
  await expect(timeline.first()).toHaveAttribute('data-kind', 'claimed');
  await expect(page.locator('ol.timeline li[data-kind="completed"]')).toHaveCount(1);
  await screenshot(page, 'operation-detail');

  await page.getByRole('link', { name: '← All operations' }).click();
  await expect(page).toHaveURL(/\/operations$/);
  expect(errors).toEqual([]);
  await api.dispose();
});

test('older pages follow the newest, with the filter kept', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, namespace } = await agentApi();
  const tool = unique('page');
  // One page is 50 rows; 52 operations make a second page of 2.
  const claims = [];
  for (let n = 0; n < 52; n++) {
    const answer = await api.post('/v1/operations', { data: { tool, key: `${tool}-${n}`, args: { n } } });
    expect(answer.status(), await answer.text()).toBe(201);
    claims.push(await answer.json());
  }
  await signIn(page, admin.username, admin.password);
  await openHydrated(page, `/operations?namespace=${namespace}`);
  const rows = page.locator('table.operations tbody tr');
  await expect(rows).toHaveCount(50);
  await expect(rows.first()).toContainText(`${tool}-51`);

  await page.getByRole('link', { name: 'Older →' }).click();
  await expect(page).toHaveURL(new RegExp(`namespace=${namespace}.*cursor=`));
  await expect(rows).toHaveCount(2);
  await expect(rows.last()).toContainText(`${tool}-0`);
  await expect(page.getByRole('link', { name: 'Older →' })).toHaveCount(0);

  await page.getByRole('link', { name: '← Newest' }).click();
  await expect(page).toHaveURL(new RegExp(`/operations\\?namespace=${namespace}$`));
  await expect(rows).toHaveCount(50);
  expect(errors).toEqual([]);
  // Nothing is left pending: 52 leases running out together would fill the unknowns page
  // that a later spec reads.
  for (const claim of claims) {
    const completed = await api.post(`/v1/operations/${claim.operation.id}/complete`, {
      data: { lease_token: claim.lease.token, outcome: 'succeeded' },
    });
    expect(completed.status(), await completed.text()).toBe(200);
  }
  await api.dispose();
});

test('an empty result says what to do, and a bad filter shows the server message', async ({ page }) => {
  await signIn(page, admin.username, admin.password);
  await openHydrated(page, `/operations?namespace=${unique('nobody')}`);
  await expect(page.getByText('No operations match this filter')).toBeVisible();
  await page.getByRole('link', { name: 'Clear the filter' }).click();
  await expect(page).toHaveURL(/\/operations$/);

  await page.goto('/operations?status=bogus');
  await expect(page.getByRole('alert')).toContainText('status must be one of');
});

test('an unknown operation id says so and links back', async ({ page }) => {
  await signIn(page, admin.username, admin.password);
  await page.goto('/operations/00000000-0000-7000-8000-000000000000');
  await expect(page.getByRole('heading', { name: 'No such operation' })).toBeVisible();
  await page.goto('/operations/not-an-id');
  await expect(page.getByRole('heading', { name: 'No such operation' })).toBeVisible();
  await page.getByRole('link', { name: 'Back to all operations' }).click();
  await expect(page).toHaveURL(/\/operations$/);
});

/** Completes what a claim answered, so its lease does not run out into Unknowns and fill
 * that page for later specs. */
async function completeClaimed(api: APIRequestContext, claimed: APIResponse) {
  const { operation, lease } = await claimed.json();
  const completed = await api.post(`/v1/operations/${operation.id}/complete`, {
    data: { lease_token: lease.token, outcome: 'succeeded' },
  });
  expect(completed.status(), await completed.text()).toBe(200);
}

test('a row that a live update brings has a working Copy button', async ({ page, context }) => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const errors = consoleErrors(page);
  const { api, namespace } = await agentApi();
  const tool = unique('lookup');
  await signIn(page, admin.username, admin.password);
  await openLive(page, `/operations?namespace=${namespace}`);

  // The operation is claimed while the page is open: its row arrives with a live update.
  const key = unique('copy-me');
  const answer = await api.post('/v1/operations', { data: { tool, key, args: { order: key } } });
  expect(answer.status(), await answer.text()).toBe(201);
  const row = page.locator('table.operations tbody tr').filter({ hasText: key });
  await expect(row).toBeVisible({ timeout: 15_000 });

  const copy = row.getByRole('button', { name: 'Copy key' });
  await copy.click();
  await expect(copy).toHaveText('Copied');
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);
  await expect(copy).toHaveText('Copy', { timeout: 5_000 });
  expect(errors).toEqual([]);
  await completeClaimed(api, answer);
  await api.dispose();
});

test('a live update on an address with a fragment changes the page in place', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, namespace } = await agentApi();
  await signIn(page, admin.username, admin.password);
  await openLive(page, `/operations?namespace=${namespace}#results`);
  // A full page load would wipe this marker.
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));

  const key = unique('fragment');
  const answer = await api.post('/v1/operations', { data: { tool: unique('lookup'), key, args: { order: key } } });
  expect(answer.status(), await answer.text()).toBe(201);
  await expect(page.locator('table.operations tbody tr').filter({ hasText: key })).toBeVisible({ timeout: 15_000 });
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);
  await expect(page).toHaveURL(/#results$/);
  expect(errors).toEqual([]);
  await completeClaimed(api, answer);
  await api.dispose();
});

test('a page whose refreshes fail asks again less and less often, and catches up once they work', async ({ page }) => {
  test.setTimeout(60_000);
  const { api, namespace } = await agentApi();
  await signIn(page, admin.username, admin.password);
  await openLive(page, `/operations?namespace=${namespace}`);

  // The page's own refreshes (fetches of /operations) fail as if the server were overloaded;
  // its change stream stays up, so it keeps hearing that something changed.
  let failing = true;
  const tries: number[] = [];
  await page.route(
    (url) => url.pathname === '/operations',
    async (route) => {
      if (!failing || route.request().resourceType() !== 'fetch') return route.continue();
      tries.push(Date.now());
      await route.fulfill({ status: 503, body: 'overloaded' });
    },
  );

  const key = unique('backoff');
  const answer = await api.post('/v1/operations', { data: { tool: unique('lookup'), key, args: { order: key } } });
  expect(answer.status(), await answer.text()).toBe(201);
  await expect.poll(() => tries.length, { timeout: 15_000 }).toBeGreaterThan(0);
  await page.waitForTimeout(10_000);
  // Once a second would be ten more tries in these ten seconds; pauses that double after each
  // failure (1, 2, 4, 8 s) leave three or four.
  const inTenSeconds = tries.filter((at) => at <= tries[0] + 10_000).length;
  expect(inTenSeconds).toBeGreaterThanOrEqual(2);
  expect(inTenSeconds).toBeLessThanOrEqual(5);
  const row = page.locator('table.operations tbody tr').filter({ hasText: key });
  await expect(row).toHaveCount(0);

  // The server answers again: the page catches up at its next try, with no reload.
  failing = false;
  await expect(row).toBeVisible({ timeout: 20_000 });
  await completeClaimed(api, answer);
  await api.dispose();
});

// An operation replayed many times: the page shows the newest events and brings the
// earlier ones on request, so it opens fast however long the trail is.
test('a long trail shows its newest events and the earlier ones on request', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api } = await agentApi();
  const body = { tool: unique('replayed'), key: unique('order'), args: { order: 7 } };
  const claimed = await api.post('/v1/operations', { data: body });
  expect(claimed.status(), await claimed.text()).toBe(201);
  const claim = await claimed.json();
  const completed = await api.post(`/v1/operations/${claim.operation.id}/complete`, {
    data: { lease_token: claim.lease.token, outcome: 'succeeded', result: {} },
  });
  expect(completed.status(), await completed.text()).toBe(200);
  for (let replay = 0; replay < 60; replay++) {
    expect((await api.post('/v1/operations', { data: body })).status()).toBe(200);
  }

  await signIn(page, admin.username, admin.password);
  await openHydrated(page, `/operations/${claim.operation.id}`);
  const timeline = page.locator('ol.timeline li');
  await expect(timeline).toHaveCount(50);
  await expect(timeline.last()).toHaveAttribute('data-kind', 'replayed');
  await page.getByRole('button', { name: 'Show earlier events' }).click();
  await expect(timeline).toHaveCount(62);
  await expect(timeline.first()).toHaveAttribute('data-kind', 'claimed');
  await expect(page.getByRole('button', { name: 'Show earlier events' })).toHaveCount(0);
  expect(errors).toEqual([]);
});

test('operations filter by creation time and stuck, and export the filtered rows as CSV', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, namespace } = await agentApi();
  const tool = unique('export');
  const keys = [unique('order-x'), unique('order-y')];
  for (const key of keys) {
    const answer = await api.post('/v1/operations', { data: { tool, key, args: { order: key } } });
    expect(answer.status(), await answer.text()).toBe(201);
  }

  await signIn(page, admin.username, admin.password);
  await openHydrated(page, `/operations?namespace=${namespace}`);
  const rows = page.locator('table.operations tbody tr');
  await expect(rows).toHaveCount(2);

  // An hour ago, as the field (labelled UTC) takes it.
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString().slice(0, 19);
  await page.getByLabel('Created from (UTC)').fill(hourAgo);
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/since=/);
  await expect(rows).toHaveCount(2);
  await page.getByLabel('Created before (UTC)').fill(hourAgo);
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page.getByText('No operations match this filter')).toBeVisible();
  await page.getByLabel('Created before (UTC)').fill('');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(rows).toHaveCount(2);

  const download = page.waitForEvent('download');
  await page.getByRole('link', { name: 'Export CSV' }).click();
  const file = await (await download).path();
  const lines = (await import('node:fs')).readFileSync(file, 'utf8').trim().split(/\r?\n/);
  expect(lines[0]).toMatch(/^id,namespace,tool,effect,key,status,/);
  expect(lines).toHaveLength(3);
  expect(lines[1]).toContain(keys[1]);
  expect(lines[2]).toContain(keys[0]);

  // Fresh operations are not stuck: the stuck filter keeps none of them.
  await page.getByLabel('Stuck only').check();
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/stuck=true/);
  await expect(page.getByText('No operations match this filter')).toBeVisible();
  await expect(page.getByLabel('Stuck only')).toBeChecked();
  expect(errors).toEqual([]);
  await api.dispose();
});
