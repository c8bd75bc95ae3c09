import { expect, test, type APIRequestContext, type Page } from '@playwright/test';
import { consoleErrors } from './pages';
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

// People's actions on the operation page, each checked against what the agent then gets
// from the REST API: approve, reject, reconcile now, resolve by hand, and a viewer who may
// do none of them (and whose forged requests the server refuses).

async function signInAs(page: Page, role: Role) {
  const person = await createPerson(role);
  await signIn(page, person.username, person.password);
  return person;
}

/** Opens an operation's page once its buttons work (every island has hydrated). */
async function openOperation(page: Page, id: string) {
  await openHydrated(page, `/operations/${id}`);
}

/** The status badge in the page's heading. */
function badge(page: Page) {
  return page.locator('h1 [data-status]');
}

/** An agent's claim on a tool that needs approval, and what it needs to claim again. */
async function awaitingApproval(): Promise<{ api: APIRequestContext; claim: Record<string, unknown>; id: string }> {
  const tool = unique('wire');
  await registerTool(tool, { effect: 'irreversible' });
  const { api } = await agentApi();
  const claim = { tool, key: unique('wire-key'), args: { to: 'ACME', amount_cents: 125000 } };
  const answer = await api.post('/v1/operations', { data: claim });
  expect(answer.status(), await answer.text()).toBe(202);
  const body = await answer.json();
  expect(body.operation.status).toBe('awaiting_approval');
  return { api, claim, id: body.operation.id };
}

test('an approver approves, and the agent\'s next claim gets a lease', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, claim, id } = await awaitingApproval();
  const approver = await signInAs(page, 'approver');
  await openOperation(page, id);
  await expect(badge(page)).toHaveText('awaiting approval');
  await expect(page.getByRole('button', { name: 'Reconcile now' })).toHaveCount(0);

  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.getByLabel('Reason (optional)').fill('customer confirmed by phone');
  await screenshot(page, 'actions-approve');
  await page.getByRole('button', { name: 'Confirm: Approve' }).click();
  await expect(badge(page)).toHaveText('approved');
  await expect(page.getByTestId('operation-facts')).toContainText(approver.username);
  await expect(page.locator('ol.timeline li[data-kind="approved"]')).toContainText('customer confirmed by phone');

  const again = await api.post('/v1/operations', { data: claim });
  expect(again.status(), await again.text()).toBe(201);
  const body = await again.json();
  expect(body.operation.id).toBe(id);
  expect(body.operation.status).toBe('pending');
  expect(body.lease.token).toBeTruthy();
  await expect(badge(page)).toHaveText('pending');
  expect(errors).toEqual([]);
  await api.dispose();
});

test('an approver rejects with a reason, and the agent\'s claim gets the rejection', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, claim, id } = await awaitingApproval();
  await signInAs(page, 'approver');
  await openOperation(page, id);

  await page.getByRole('button', { name: 'Reject', exact: true }).click();
  const confirm = page.getByRole('button', { name: 'Confirm: Reject' });
  await expect(confirm).toBeDisabled(); // a rejection needs a reason
  await page.getByLabel('Reason (required)').fill('amount over the weekly limit');
  await confirm.click();
  await expect(badge(page)).toHaveText('rejected');
  await expect(page.getByRole('button', { name: 'Force-expire' })).toHaveCount(0); // approvers do not operate
  await screenshot(page, 'actions-reject');

  const again = await api.post('/v1/operations', { data: claim });
  expect(again.status(), await again.text()).toBe(200);
  const body = await again.json();
  expect(body.operation.status).toBe('rejected');
  expect(body.note).toContain('amount over the weekly limit');
  expect(errors).toEqual([]);
  await api.dispose();
});

test('an operator reconciles an unknown operation and sees it succeed without reloading', async ({ page }) => {
  const errors = consoleErrors(page);
  const tool = unique('charge');
  await registerTool(tool, {
    effect: 'non_idempotent_write',
    executor: {
      url: `${sandboxURL}/actions/${tool}`,
      reconcile_url: `${sandboxURL}/actions/${tool}/lookup`,
      // Also the grace before the background reconciler's first look, so within this test
      // only the button settles it.
      timeout_ms: 20000,
    },
  });
  const key = unique('charge-key');
  // idem sends the operation's own provider key, unknown until the invoke: the fault names the tool.
  await sandboxFault({ fault: 'drop_after_commit', action: tool });
  const { api } = await agentApi();
  const invoked = await api.post(`/v1/tools/${tool}/invoke`, { data: { key, args: { amount_cents: 990 } } });
  const body = await invoked.json();
  expect(body.operation.status, JSON.stringify(body)).toBe('unknown');
  const id = body.operation.id;

  await signInAs(page, 'operator');
  await openOperation(page, id);
  await expect(badge(page)).toHaveText('unknown');
  // A full page load would wipe this marker; the badge must change in place.
  await page.evaluate(() => ((window as unknown as { stillHere: boolean }).stillHere = true));

  await page.getByRole('button', { name: 'Reconcile now' }).click();
  await page.getByRole('button', { name: 'Confirm: Reconcile now' }).click();
  await expect(badge(page)).toHaveText('succeeded');
  expect(await page.evaluate(() => (window as unknown as { stillHere?: boolean }).stillHere)).toBe(true);
  await expect(page.locator('ol.timeline li[data-kind="reconciled"]')).toHaveCount(1);
  await screenshot(page, 'actions-reconcile');
  expect(await sandboxEffects(body.operation.provider_key)).toBe(1);
  // Settled: only force-expire is left for an operator.
  await expect(page.getByRole('button', { name: 'Reconcile now' })).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Force-expire' })).toBeVisible();
  expect(errors).toEqual([]);
  await api.dispose();
});

test('an operator resolves a pending operation by hand, then force-expires its key', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api } = await agentApi();
  const claim = { tool: unique('email'), key: unique('email-key'), args: { to: 'a@example.com' } };
  const claimed = await api.post('/v1/operations', { data: claim });
  expect(claimed.status(), await claimed.text()).toBe(201);
  const id = (await claimed.json()).operation.id;

  await signInAs(page, 'operator');
  await openOperation(page, id);
  await expect(badge(page)).toHaveText('pending');
  await page.getByRole('button', { name: 'Resolve…' }).click();
  await page.getByLabel('Outcome').selectOption('succeeded');
  await page.getByLabel('Result (JSON, optional)').fill('{"message_id": "m-42"}');
  await page.getByRole('button', { name: 'Resolve', exact: true }).click();
  await page.getByLabel('Reason (required)').fill('the provider dashboard shows it was sent');
  await page.getByRole('button', { name: 'Confirm: Resolve' }).click();

  await expect(badge(page)).toHaveText('succeeded');
  const resolved = page.locator('ol.timeline li[data-kind="resolved"]');
  await expect(resolved).toContainText('the provider dashboard shows it was sent');
  await expect(page.getByText('m-42')).toBeVisible();
  await screenshot(page, 'actions-resolve');

  // Force-expire ends the key's life: the agent's next claim starts a new operation.
  await page.getByRole('button', { name: 'Force-expire' }).click();
  await page.getByLabel('Reason (required)').fill('the customer asked for a second email');
  await page.getByRole('button', { name: 'Confirm: Force-expire' }).click();
  await expect(page.locator('ol.timeline li[data-kind="expired"]')).toContainText('the customer asked for a second email');
  const fresh = await api.post('/v1/operations', { data: claim });
  expect(fresh.status(), await fresh.text()).toBe(201);
  expect((await fresh.json()).operation.id).not.toBe(id);
  expect(errors).toEqual([]);
  await api.dispose();
});

test('a refused action shows the server message', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, id } = await awaitingApproval();
  await signInAs(page, 'approver');
  // Without the change stream this page cannot catch up with the decision below, so the
  // click lands on a stale page, as it would on a slow connection.
  await page.route('**/v1/operations/changes', (route) => route.abort());
  await openOperation(page, id);
  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  // Someone else decides first.
  const admin = await adminApi();
  const rejected = await admin.post(`/v1/operations/${id}/reject`, { data: { reason: 'first decision' } });
  expect(rejected.status(), await rejected.text()).toBe(200);
  await page.getByRole('button', { name: 'Confirm: Approve' }).click();
  await expect(page.getByRole('alert')).not.toBeEmpty();
  await expect(badge(page)).toHaveText('rejected');
  // The browser itself logs the refused request (409) and the blocked stream.
  expect(errors.filter((e) => !e.includes('409') && !e.includes('ERR_FAILED'))).toEqual([]);
  await admin.dispose();
  await api.dispose();
});

test('a refusal is gone once a later action succeeds', async ({ page }) => {
  const errors = consoleErrors(page);
  // An unknown operation of a tool with no reconcile_url: "Reconcile now" is refused (409).
  const { api } = await agentApi();
  const claimed = await api.post('/v1/operations', {
    data: { tool: unique('sms'), key: unique('sms-key'), args: { to: '+15550100' } },
  });
  expect(claimed.status(), await claimed.text()).toBe(201);
  const { operation, lease } = await claimed.json();
  const lost = await api.post(`/v1/operations/${operation.id}/unknown`, {
    data: { lease_token: lease.token, error: { code: 'timeout', message: 'no answer' } },
  });
  expect(lost.status(), await lost.text()).toBe(200);

  await signInAs(page, 'operator');
  await openOperation(page, operation.id);
  await page.getByRole('button', { name: 'Reconcile now' }).click();
  await page.getByRole('button', { name: 'Confirm: Reconcile now' }).click();
  await expect(page.getByRole('alert')).toContainText('reconcile_url');
  await expect(badge(page)).toHaveText('unknown');

  // The person resolves it by hand instead: the refusal is history, not news.
  await page.getByRole('button', { name: 'Resolve…' }).click();
  await page.getByLabel('Outcome').selectOption('succeeded');
  await page.getByRole('button', { name: 'Resolve', exact: true }).click();
  await page.getByLabel('Reason (required)').fill('the provider says it was delivered');
  await page.getByRole('button', { name: 'Confirm: Resolve' }).click();
  await expect(badge(page)).toHaveText('succeeded');
  await expect(page.getByRole('button', { name: 'Force-expire' })).toBeVisible();
  await expect(page.getByRole('alert')).toHaveCount(0);
  // The browser itself logs the refused request (409).
  expect(errors.filter((e) => !e.includes('409'))).toEqual([]);
  await api.dispose();
});

test('a viewer sees no actions, and forged approvals are refused with 403', async ({ page }) => {
  const errors = consoleErrors(page);
  const { api, id } = await awaitingApproval();
  await signInAs(page, 'viewer');
  await openOperation(page, id);
  await expect(badge(page)).toHaveText('awaiting approval');
  for (const name of ['Approve', 'Reject', 'Reconcile now', 'Resolve…', 'Force-expire']) {
    await expect(page.getByRole('button', { name, exact: true })).toHaveCount(0);
  }
  await screenshot(page, 'actions-viewer');

  const rest = await page.request.post(`/v1/operations/${id}/approve`, { data: {} });
  expect(rest.status(), await rest.text()).toBe(403);
  const serverFn = await page.request.post('/api/approve', { form: { id } });
  expect(serverFn.status(), await serverFn.text()).toBe(403);

  const read = await api.get(`/v1/operations/${id}`);
  expect((await read.json()).operation.status).toBe('awaiting_approval');
  await page.reload();
  await expect(badge(page)).toHaveText('awaiting approval');
  expect(errors).toEqual([]);
  await api.dispose();
});
