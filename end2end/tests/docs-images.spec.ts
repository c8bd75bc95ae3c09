// The screenshots in the documentation (docs/images/dashboard*.png: light, dark and on a
// phone) are taken here, of the
// overview with a little of everything on it: replays, refused duplicates, a key reused,
// outcomes that went unknown and were reconciled, one settled by hand, one still unknown and
// requests waiting for approval. `make docs-images` (UPDATE_DOCS_IMAGES=1) saves it; in
// `make test` the spec runs all the same and checks the page, without touching docs/.
import { expect, test, type Page } from '@playwright/test';
import { admin, adminApi, agentApi, registerTool, sandboxFault, sandboxURL, screenshot, signIn, unique } from './support';

const updateDocsImages = process.env.UPDATE_DOCS_IMAGES === '1';

/** Saves docs/images/<name>.png with UPDATE_DOCS_IMAGES=1, else a screenshot to look at. */
async function save(page: Page, name: string, options: { fullPage?: boolean } = {}) {
  if (updateDocsImages) {
    await page.screenshot({ path: `../docs/images/${name}.png`, ...options });
  } else {
    await screenshot(page, `docs-${name}`);
  }
}

async function tile(page: Page, name: string): Promise<number> {
  const text = await page.getByTestId(`tile-${name.toLowerCase().replaceAll(' ', '-')}`).innerText();
  return Number.parseInt(text, 10);
}

test('the overview of a busy ledger renders every tile and chart (the docs screenshot)', async ({ page }) => {
  const { api } = await agentApi(unique('support-bot'));

  // Refunds that completed, each retried twice (replays), one reused with other arguments.
  const refund = unique('refund');
  for (let order = 1; order <= 4; order++) {
    const claim = { tool: refund, key: unique(`order-${order}`), args: { order_id: `${order}`, amount_cents: 500 } };
    const first = await api.post('/v1/operations', { data: claim });
    expect(first.status()).toBe(201);
    const { operation, lease } = await first.json();
    const done = await api.post(`/v1/operations/${operation.id}/complete`, {
      data: { lease_token: lease.token, outcome: 'succeeded', result: { refund_id: `re_${order}` } },
    });
    expect(done.status()).toBe(200);
    for (let retry = 0; retry < 2; retry++) {
      expect((await api.post('/v1/operations', { data: claim })).status()).toBe(200);
    }
    if (order === 1) {
      const reused = await api.post('/v1/operations', { data: { ...claim, args: { order_id: '1', amount_cents: 900 } } });
      expect(reused.status()).toBe(422);
    }
  }

  // A duplicate while the first still runs (409), and two outcomes nobody could tell: one
  // settled by an operator, one left unknown.
  const email = unique('send_email');
  const running = { tool: email, key: unique('welcome'), args: { to: 'ada@example.org' } };
  const started = await api.post('/v1/operations', { data: running });
  expect(started.status()).toBe(201);
  expect((await api.post('/v1/operations', { data: running })).status()).toBe(409);
  const { operation: first, lease } = await started.json();
  expect((await api.post(`/v1/operations/${first.id}/unknown`, { data: { lease_token: lease.token } })).status()).toBe(200);
  const people = await adminApi();
  const resolved = await people.post(`/v1/operations/${first.id}/resolve`, {
    data: { outcome: 'succeeded', reason: 'the mail relay shows it was sent' },
  });
  expect(resolved.status(), await resolved.text()).toBe(200);
  const lost = await api.post('/v1/operations', { data: { tool: email, key: unique('reminder'), args: { to: 'bob@example.org' } } });
  const lostBody = await lost.json();
  await api.post(`/v1/operations/${lostBody.operation.id}/unknown`, { data: { lease_token: lostBody.lease.token } });

  // idem's own calls that lost their answer after the provider acted: unknown, then settled
  // by the reconciler from the provider's lookup.
  const payout = unique('payout');
  await registerTool(payout, {
    effect: 'non_idempotent_write',
    executor: {
      url: `${sandboxURL}/actions/${payout}`,
      reconcile_url: `${sandboxURL}/actions/${payout}/lookup`,
      timeout_ms: 500,
    },
  });
  await sandboxFault({ fault: 'drop_after_commit', action: payout, times: 2 });
  const payoutIds: string[] = [];
  for (let n = 1; n <= 2; n++) {
    const invoked = await api.post(`/v1/tools/${payout}/invoke`, { data: { key: unique('payout'), args: { n } } });
    expect(invoked.status()).toBe(201);
    payoutIds.push((await invoked.json()).operation.id);
  }
  // Settled before the page is opened: a change that lands between the page's render and its
  // change stream's start would not refresh it.
  for (const id of payoutIds) {
    await expect
      .poll(async () => (await (await api.get(`/v1/operations/${id}`)).json()).operation.status, { timeout: 15_000 })
      .toBe('succeeded');
  }

  // Deployments waiting for a person.
  const deploy = unique('deploy');
  await registerTool(deploy, { effect: 'irreversible' });
  const waitingIds: string[] = [];
  for (const service of ['billing', 'search']) {
    const waiting = await api.post('/v1/operations', { data: { tool: deploy, key: unique(service), args: { service } } });
    expect(waiting.status()).toBe(202);
    waitingIds.push((await waiting.json()).operation.id);
  }

  await page.setViewportSize({ width: 1280, height: 900 });
  await signIn(page, admin.username, admin.password);
  await page.goto('/?window=1h');
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  await expect(page.getByTestId('live-indicator')).toHaveText('Live');
  await expect.poll(() => tile(page, 'Duplicates prevented')).toBeGreaterThanOrEqual(9);
  await expect.poll(() => tile(page, 'Awaiting approval')).toBeGreaterThanOrEqual(2);
  await expect.poll(() => tile(page, 'Unknown now')).toBeGreaterThanOrEqual(1);
  await expect.poll(() => tile(page, 'Manual interventions')).toBeGreaterThanOrEqual(1);
  // Without a reconciliation in the window the tile reads "p50 —".
  await expect(page.getByTestId('tile-reconciliation-latency')).not.toContainText('—');
  for (const id of ['duplicates', 'latency', 'interventions']) {
    await expect(page.locator(`figure[data-chart="${id}"] svg.chart-plot`)).toBeVisible();
  }

  await save(page, 'dashboard');
  await page.emulateMedia({ colorScheme: 'dark' });
  await save(page, 'dashboard-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  await expect(page.locator('figure[data-chart="duplicates"] svg.chart-plot')).toBeVisible();
  await save(page, 'dashboard-phone', { fullPage: true });

  // Leave the queues as they were for the specs that follow: they look for their own rows
  // among the oldest unknowns and approvals.
  const settled = await people.post(`/v1/operations/${lostBody.operation.id}/resolve`, {
    data: { outcome: 'failed', reason: 'the screenshot is taken' },
  });
  expect(settled.status(), await settled.text()).toBe(200);
  for (const id of waitingIds) {
    const rejected = await people.post(`/v1/operations/${id}/reject`, { data: { reason: 'the screenshot is taken' } });
    expect(rejected.status(), await rejected.text()).toBe(200);
  }
  await people.dispose();
  await api.dispose();
});
