import { expect, test, type Page } from '@playwright/test';
import { consoleErrors, openLive } from './pages';
import { adminApi, agentApi, createPerson, registerTool, signIn, unique } from './support';

// One request for approval on its own page (/approvals/<id>): opened from the queue, it shows
// the call, its arguments and what the same run did before; the approver decides there. The
// header counts the requests that wait, live.

/** Rejects whatever earlier tests left waiting, so the header counts this test's request. */
async function emptyTheQueue() {
  const api = await adminApi();
  for (;;) {
    const listed = await api.get('/v1/operations?status=awaiting_approval&limit=100');
    expect(listed.status(), await listed.text()).toBe(200);
    const { operations } = await listed.json();
    if (operations.length === 0) break;
    for (const operation of operations) {
      const rejected = await api.post(`/v1/operations/${operation.id}/reject`, {
        data: { reason: 'cleared by the approval page test' },
      });
      expect(rejected.status(), await rejected.text()).toBe(200);
    }
  }
  await api.dispose();
}

/** The count of waiting requests in the header's navigation. */
function waitingCount(page: Page) {
  return page.getByRole('navigation', { name: 'Main' }).getByTestId('waiting-approvals');
}

test('an approver opens a request from the queue, sees its run, and approves it', async ({ page }) => {
  await emptyTheQueue();
  const run = unique('run');
  const agent = await agentApi();
  const lookup = await agent.api.post('/v1/operations', {
    data: { tool: unique('lookup'), key: unique('lookup-key'), args: { account: 'ACME' }, run_id: run, step: 1 },
  });
  expect(lookup.status(), await lookup.text()).toBe(201);
  const earlier = (await lookup.json()).operation;

  const tool = unique('wire');
  await registerTool(tool, { effect: 'irreversible' });
  const claim = { tool, key: unique('wire-key'), args: { to: 'ACME', amount_cents: 125000 }, run_id: run, step: 2 };
  const asked = await agent.api.post('/v1/operations', { data: claim });
  expect(asked.status(), await asked.text()).toBe(202);
  const id = (await asked.json()).operation.id;

  const approver = await createPerson('approver');
  await signIn(page, approver.username, approver.password);
  const errors = consoleErrors(page);
  await openLive(page, '/approvals');
  await expect(waitingCount(page)).toHaveText('1');

  const card = page.getByRole('listitem').filter({ hasText: claim.key });
  await card.getByRole('link', { name: 'Open request' }).click();
  await expect(page).toHaveURL(new RegExp(`/approvals/${id}$`));
  await openLive(page, `/approvals/${id}`); // hydrated, so the decision buttons work

  await expect(page.getByRole('heading', { level: 1 })).toContainText(tool);
  const request = page.locator('article.approval');
  await expect(request).toContainText('ACME');
  await expect(request).toContainText('125000');
  await expect(page.getByText(`${run} · step 2`)).toBeVisible();
  const earlierSection = page.getByRole('region', { name: 'Earlier in this run' });
  const earlierLink = earlierSection.getByRole('link', { name: earlier.tool });
  await expect(earlierLink).toHaveAttribute('href', `/operations/${earlier.id}`);

  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  await page.getByRole('button', { name: 'Confirm: Approve' }).click();
  // The page shows the request as it is now: decided, with nothing left to decide.
  await expect(page.locator('h1 [data-status]')).toHaveText('approved');
  await expect(page.getByRole('button', { name: 'Approve', exact: true })).toHaveCount(0);
  await expect(waitingCount(page)).toHaveCount(0);

  const again = await agent.api.post('/v1/operations', { data: claim });
  expect(again.status(), await again.text()).toBe(201);
  const body = await again.json();
  expect(body.operation.id).toBe(id);
  expect(body.operation.status).toBe('pending');
  expect(body.lease.token).toBeTruthy();
  expect(errors).toEqual([]);
  await agent.api.dispose();
});

test('an unknown request is the 404 page', async ({ page }) => {
  const approver = await createPerson('approver');
  await signIn(page, approver.username, approver.password);
  const answer = await page.goto('/approvals/0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b');
  expect(answer?.status()).toBe(404);
  await expect(page.getByRole('heading', { name: 'Page not found' })).toBeVisible();
});
