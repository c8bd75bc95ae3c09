// The queues people work through: approvals (approve and reject inline, a new request appears
// without reloading) and unknowns (bulk reconcile); and what a viewer is not offered.
import { expect, test, type Locator, type Page } from '@playwright/test';
import { randomUUID } from 'node:crypto';
import { consoleErrors, openLive } from './pages';
import {
  adminApi,
  agentApi,
  createPerson,
  openHydrated,
  registerTool,
  sandboxEffects,
  sandboxFault,
  sandboxURL,
  screenshot,
  signIn,
  unique,
  type Role,
} from './support';

/** Signs a new person of `role` in and opens `path`. The overview, where signing in lands,
 * is another page's business: the console is watched from `path` on. */
async function openAs(page: Page, role: Role, path: string): Promise<string[]> {
  const person = await createPerson(role);
  await signIn(page, person.username, person.password);
  await openLive(page, path);
  return consoleErrors(page);
}

/** Marks the window: a reload would wipe the mark. */
async function markWindow(page: Page) {
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));
}

async function windowKept(page: Page) {
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);
}

/** Opens a card's rejection and types `text` into its reason, which keeps the focus. */
async function startRejecting(card: Locator, text: string): Promise<Locator> {
  await card.getByRole('button', { name: 'Reject' }).click();
  const reason = card.getByLabel('Reason (required)');
  await reason.fill(text);
  await reason.focus();
  return reason;
}

/** An irreversible tool and an agent that asks to run it. */
async function approvalSetup() {
  const tool = unique('deploy');
  await registerTool(tool, { effect: 'irreversible' });
  const agent = await agentApi();
  const key = unique('approval-key');
  const claim = () =>
    agent.api.post('/v1/operations', {
      data: { tool, key, args: { service: 'checkout', version: '1.4.2' }, run_id: 'run-e2e', step: 3 },
    });
  return { tool, key, claim, agent };
}

/** An operation of `tool` under `key`, in a fresh namespace, whose caller reported that it
 * could not tell what happened: it waits in Unknowns. */
async function unknownOperation(tool: string, key: string): Promise<{ id: string; namespace: string }> {
  const agent = await agentApi();
  const claimed = await agent.api.post('/v1/operations', { data: { tool, key, args: { amount_cents: 500 } } });
  expect(claimed.status(), await claimed.text()).toBe(201);
  const { operation, lease } = await claimed.json();
  const lost = await agent.api.post(`/v1/operations/${operation.id}/unknown`, {
    data: { lease_token: lease.token, error: { code: 'timeout', message: 'no answer' } },
  });
  expect(lost.status(), await lost.text()).toBe(200);
  await agent.api.dispose();
  return { id: operation.id, namespace: agent.namespace };
}

/** Someone else settles an operation by hand, through the REST API. */
async function resolveElsewhere(id: string) {
  const someoneElse = await adminApi();
  const resolved = await someoneElse.post(`/v1/operations/${id}/resolve`, {
    data: { outcome: 'succeeded', result: { refund_id: 're_elsewhere' }, reason: 'checked with the provider' },
  });
  expect(resolved.status(), await resolved.text()).toBe(200);
  await someoneElse.dispose();
}

test('a new request appears without reload, and approving it lets the agent run', async ({ page }) => {
  const { tool, key, claim, agent } = await approvalSetup();
  const errors = await openAs(page, 'approver', '/approvals');
  await expect(page.getByRole('heading', { name: 'Approvals' })).toBeVisible();
  await markWindow(page);

  const asked = await claim();
  expect(asked.status(), await asked.text()).toBe(202);

  const card = page.getByRole('listitem').filter({ hasText: key });
  await expect(card).toBeVisible({ timeout: 15_000 });
  await expect(card).toContainText(tool);
  await expect(card).toContainText('irreversible');
  await expect(card).toContainText(agent.namespace);
  await expect(card).toContainText('run-e2e · step 3');
  await expect(card.getByText('checkout')).toBeVisible();
  await screenshot(page, 'queues-approval');

  await card.getByRole('button', { name: 'Approve' }).click();
  await card.getByRole('button', { name: 'Confirm: Approve' }).click();
  await expect(card).toHaveCount(0, { timeout: 15_000 });
  await windowKept(page);

  const run = await claim();
  expect(run.status(), await run.text()).toBe(201);
  const body = await run.json();
  expect(body.operation.status).toBe('pending');
  expect(body.lease.token).toBeTruthy();
  expect(errors).toEqual([]);
});

test('a reason being typed survives a live update that brings another request', async ({ page }) => {
  const first = await approvalSetup();
  expect((await first.claim()).status()).toBe(202);
  const errors = await openAs(page, 'approver', '/approvals');
  await markWindow(page);

  const card = page.getByRole('listitem').filter({ hasText: first.key });
  const reason = await startRejecting(card, 'half a thought');

  // Another request arrives: the page is fetched again and morphed in place.
  const second = await approvalSetup();
  expect((await second.claim()).status()).toBe(202);
  const other = page.getByRole('listitem').filter({ hasText: second.key });
  await expect(other).toBeVisible({ timeout: 15_000 });

  // The open confirmation, its text and the focus are where the person left them.
  await expect(reason).toHaveValue('half a thought');
  await expect(reason).toBeFocused();
  await windowKept(page);
  // The new card's buttons work: its island was hydrated when it arrived.
  await other.getByRole('button', { name: 'Reject' }).click();
  await expect(other.getByRole('button', { name: 'Confirm: Reject' })).toBeDisabled();

  await reason.fill('half a thought, finished');
  await card.getByRole('button', { name: 'Confirm: Reject' }).click();
  await expect(card).toHaveCount(0, { timeout: 15_000 });
  const answer = await first.claim();
  expect((await answer.json()).note).toContain('half a thought, finished');
  expect(errors).toEqual([]);
});

test('a reason being typed keeps its focus when another approver decides the card above', async ({ page }) => {
  const first = await approvalSetup();
  const firstAsked = await first.claim();
  expect(firstAsked.status()).toBe(202);
  const second = await approvalSetup();
  expect((await second.claim()).status()).toBe(202);
  const errors = await openAs(page, 'approver', '/approvals');
  await markWindow(page);

  // Oldest first: the second request's card is below the first's.
  const above = page.getByRole('listitem').filter({ hasText: first.key });
  const below = page.getByRole('listitem').filter({ hasText: second.key });
  const reason = await startRejecting(below, 'half a thought');

  // Someone else approves the card above; the live update takes it away.
  const someoneElse = await adminApi();
  const id = (await firstAsked.json()).operation.id;
  const approved = await someoneElse.post(`/v1/operations/${id}/approve`, { data: {} });
  expect(approved.status(), await approved.text()).toBe(200);
  await someoneElse.dispose();
  await expect(above).toHaveCount(0, { timeout: 15_000 });

  await expect(reason).toHaveValue('half a thought');
  await expect(reason).toBeFocused();
  await windowKept(page);
  expect(errors).toEqual([]);
});

test('a decided card leaves the queue even when the live stream is down', async ({ page }) => {
  const { key, claim } = await approvalSetup();
  expect((await claim()).status()).toBe(202);
  await page.route('**/v1/operations/changes', (route) => route.abort());
  const person = await createPerson('approver');
  await signIn(page, person.username, person.password);
  await openHydrated(page, '/approvals');

  const card = page.getByRole('listitem').filter({ hasText: key });
  await card.getByRole('button', { name: 'Approve' }).click();
  await card.getByRole('button', { name: 'Confirm: Approve' }).click();
  await expect(card).toHaveCount(0, { timeout: 15_000 });
  expect((await claim()).status()).toBe(201);
});

test('rejecting with a reason tells the agent', async ({ page }) => {
  const { key, claim } = await approvalSetup();
  expect((await claim()).status()).toBe(202);
  const errors = await openAs(page, 'approver', '/approvals');

  const card = page.getByRole('listitem').filter({ hasText: key });
  await card.getByRole('button', { name: 'Reject' }).click();
  const confirm = card.getByRole('button', { name: 'Confirm: Reject' });
  await expect(confirm).toBeDisabled();
  await card.getByLabel('Reason (required)').fill('not during the freeze');
  await confirm.click();
  await expect(card).toHaveCount(0, { timeout: 15_000 });

  const answer = await claim();
  expect(answer.status(), await answer.text()).toBe(200);
  const body = await answer.json();
  expect(body.operation.status).toBe('rejected');
  expect(body.note).toContain('not during the freeze');
  expect(errors).toEqual([]);
});

test('an operator reconciles the selected unknowns in one go', async ({ page }) => {
  const tool = unique('refund');
  await registerTool(tool, {
    executor: {
      url: `${sandboxURL}/actions/${tool}`,
      reconcile_url: `${sandboxURL}/actions/${tool}/lookup`,
      timeout_ms: 20000,
    },
  });
  const agent = await agentApi();
  const keys = [unique('lost-1'), unique('lost-2')];
  const providerKeys = new Map<string, string>();
  for (const key of keys) {
    // One invoke at a time: the fault hits the tool's next call, whose provider key idem makes.
    await sandboxFault({ fault: 'drop_after_commit', action: tool });
    const invoked = await agent.api.post(`/v1/tools/${tool}/invoke`, { data: { key, args: { amount_cents: 500 } } });
    providerKeys.set(key, (await invoked.json()).operation.provider_key);
  }

  const errors = await openAs(page, 'operator', '/unknowns');
  for (const key of keys) {
    const row = page.getByRole('row').filter({ hasText: key });
    await expect(row.getByText('unknown', { exact: true })).toBeVisible();
    await row.getByRole('checkbox', { name: `Select ${key}` }).check();
  }
  await screenshot(page, 'queues-unknowns');
  await page.getByRole('button', { name: 'Reconcile selected' }).click();
  await page.getByRole('button', { name: 'Confirm: Reconcile selected' }).click();

  const results = page.getByRole('status', { name: 'Reconciliation results' });
  for (const key of keys) {
    await expect(results.getByRole('listitem').filter({ hasText: key })).toContainText('settled: succeeded');
    await expect(page.getByRole('row').filter({ hasText: key })).toHaveCount(0);
    expect(await sandboxEffects(providerKeys.get(key)!)).toBe(1);
  }
  expect(errors).toEqual([]);
});

test('unknowns show how long each has been unknown and its failed lookups, the longest first', async ({ page }) => {
  const tool = unique('ages');
  const first = unique('age-first');
  const second = unique('age-second');
  await unknownOperation(tool, first);
  await unknownOperation(tool, second);

  const errors = await openAs(page, 'operator', '/unknowns');
  await expect(page.getByTestId('stuck-after')).toContainText('One unknown for more than 15 minutes is stuck.');
  const header = page.locator('table.unknowns thead');
  await expect(header).toContainText('Unknown for');
  await expect(header).toContainText('Failed lookups');
  for (const key of [first, second]) {
    const row = page.getByRole('row').filter({ hasText: key });
    await expect(row.getByTestId('unknown-for')).toHaveText(/^(under a minute|\d+ min)$/);
    await expect(row.getByTestId('failed-lookups')).toHaveText('0');
  }
  // The longest unknown first: the first one's row comes before the second's.
  const keys = await page.locator('table.unknowns tbody tr').allInnerTexts();
  const at = (key: string) => keys.findIndex((text) => text.includes(key));
  expect(at(first)).toBeGreaterThanOrEqual(0);
  expect(at(first)).toBeLessThan(at(second));
  expect(errors).toEqual([]);
});

test('a ticked unknown that leaves does not pass its tick to another with the same key', async ({ page }) => {
  // The same key in two namespaces: two operations, two rows that read alike.
  const tool = unique('refund');
  const key = unique('twin');
  const older = await unknownOperation(tool, key);
  const newer = await unknownOperation(tool, key);

  const errors = await openAs(page, 'operator', '/unknowns');
  const olderRow = page.getByRole('row').filter({ hasText: older.namespace });
  const newerRow = page.getByRole('row').filter({ hasText: newer.namespace });
  await olderRow.getByRole('checkbox', { name: `Select ${key}` }).check();
  await expect(newerRow.getByRole('checkbox')).not.toBeChecked();

  // Someone settles the ticked one elsewhere; the live update takes its row away.
  await resolveElsewhere(older.id);
  await expect(olderRow).toHaveCount(0, { timeout: 15_000 });

  // The row left is the other operation's, and nobody ticked it.
  await expect(newerRow.getByRole('checkbox')).not.toBeChecked();
  await expect(newerRow.getByRole('checkbox')).toHaveAttribute('value', newer.id);
  expect(errors).toEqual([]);
});

test('the selection follows rows that a live update takes away', async ({ page }) => {
  const tool = unique('refund');
  const leaving = await unknownOperation(tool, unique('leaving'));
  const staying = await unknownOperation(tool, unique('staying'));
  const errors = await openAs(page, 'operator', '/unknowns');
  const leavingRow = page.getByRole('row').filter({ hasText: leaving.namespace });
  const stayingRow = page.getByRole('row').filter({ hasText: staying.namespace });
  await expect(stayingRow).toHaveCount(1);
  const reconcile = page.getByRole('button', { name: 'Reconcile selected' });
  await expect(reconcile).toBeDisabled();
  await leavingRow.getByRole('checkbox').check();
  await expect(reconcile).toBeEnabled();

  await resolveElsewhere(leaving.id);
  await expect(leavingRow).toHaveCount(0, { timeout: 15_000 });
  // Nothing ticked is left, so there is nothing to reconcile.
  await expect(reconcile).toBeDisabled();
  await expect(stayingRow.getByRole('checkbox')).not.toBeChecked();
  expect(errors).toEqual([]);
});

test('a viewer is offered no actions, and a forged one is refused', async ({ page }) => {
  const { key, claim } = await approvalSetup();
  expect((await claim()).status()).toBe(202);
  const errors = await openAs(page, 'viewer', '/approvals');
  const card = page.getByRole('listitem').filter({ hasText: key });
  await expect(card).toBeVisible();
  await expect(card.getByRole('button', { name: 'Approve' })).toHaveCount(0);
  await expect(card.getByRole('button', { name: 'Reject' })).toHaveCount(0);

  await openLive(page, '/unknowns');
  await expect(page.getByRole('heading', { name: 'Unknowns' })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Reconcile selected' })).toHaveCount(0);
  await expect(page.getByRole('checkbox')).toHaveCount(0);

  const forged = await page.request.post('/api/reconcile', { form: { id: randomUUID() } });
  expect(forged.status()).toBe(403);
  expect(errors).toEqual([]);
});
