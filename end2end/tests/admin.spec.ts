// What admins do in the browser: people, API keys (shown once, revocable) and tools; and what
// others are refused.
import { expect, request, test } from '@playwright/test';
import { consoleErrors, openLive } from './pages';
import { admin, baseURL, createPerson, screenshot, signIn, unique } from './support';

test('the admin creates a person, who can then sign in', async ({ page, browser }) => {
  await signIn(page, admin.username, admin.password);
  await expect(page.getByRole('link', { name: 'Admin' })).toBeVisible();
  await openLive(page, '/admin');
  const errors = consoleErrors(page);
  await expect(page.getByRole('heading', { name: 'People' })).toBeVisible();

  const username = unique('approver');
  const password = 'a long enough password';
  const form = page.getByRole('form', { name: 'Create a person' });
  await form.getByLabel('Username').fill(username);
  await form.getByLabel('Role').selectOption('approver');
  await form.getByLabel('Password').fill(password);
  await form.getByRole('button', { name: 'Create person' }).click();
  await expect(page.getByRole('status')).toHaveText(`Created ${username} (approver).`);
  await expect(page.getByRole('row').filter({ hasText: username })).toContainText('approver');

  const context = await browser.newContext();
  const other = await context.newPage();
  await signIn(other, username, password);
  await expect(other.getByText('Signed in as')).toContainText(username);
  await context.close();
  expect(errors).toEqual([]);
});

test('a new API key is shown once, works, and stops working when revoked', async ({ page }) => {
  await signIn(page, admin.username, admin.password);
  await openLive(page, '/admin');
  const errors = consoleErrors(page);

  const namespace = unique('ns');
  const form = page.getByRole('form', { name: 'Create an API key' });
  await form.getByLabel('Namespace').fill(namespace);
  await form.getByLabel('Key name').fill('e2e browser key');
  await form.getByRole('button', { name: 'Create key' }).click();
  const shown = page.getByRole('status', { name: 'New API key' });
  await expect(shown).toContainText('it cannot be shown again');
  const key = (await shown.locator('code').textContent())?.trim() ?? '';
  expect(key.length).toBeGreaterThan(20);
  await screenshot(page, 'admin-new-key');

  const agent = await request.newContext({ baseURL, extraHTTPHeaders: { authorization: `Bearer ${key}` } });
  expect((await agent.get('/v1/operations')).status()).toBe(200);

  await openLive(page, '/admin');
  await expect(page.getByRole('status', { name: 'New API key' })).toHaveCount(0);
  await expect(page.getByText(key)).toHaveCount(0);

  const row = page.getByRole('row').filter({ hasText: namespace });
  await row.getByRole('button', { name: 'Revoke' }).click();
  await row.getByRole('button', { name: 'Confirm: Revoke' }).click();
  await expect(page.getByRole('row').filter({ hasText: namespace })).toContainText('revoked');
  expect((await agent.get('/v1/operations')).status()).toBe(401);
  await agent.dispose();
  expect(errors).toEqual([]);
});

test('the admin registers a tool through the form and sees its guarantee', async ({ page }) => {
  await signIn(page, admin.username, admin.password);
  await openLive(page, '/tools');
  const errors = consoleErrors(page);

  const name = unique('charge');
  await page.getByRole('button', { name: 'Register a tool' }).click();
  const form = page.getByRole('form', { name: 'Register a tool' });
  await form.getByLabel('Name').fill(name);
  await form.getByLabel('Effect').selectOption('non_idempotent_write');
  await form.getByLabel('Lease (seconds)').fill('abc');
  await form.getByRole('button', { name: 'Save tool' }).click();
  await expect(form.getByRole('alert')).toHaveText('lease_seconds must be a whole number of at least 0');
  await form.getByLabel('Lease (seconds)').fill('0');
  await form.getByRole('button', { name: 'Save tool' }).click();
  await expect(form.getByRole('alert')).toHaveText('lease_seconds must be 1 to 3600');

  await form.getByLabel('Lease (seconds)').fill('20');
  await form.getByLabel('Key fields').fill('order_id, amount_cents');
  await form.getByLabel('Executor URL').fill('http://127.0.0.1:9/actions/charge');
  await form.getByLabel('Provider dedupes by key').check();
  await form.getByRole('button', { name: 'Save tool' }).click();
  await expect(page.getByRole('status')).toHaveText(`Registered ${name}.`);

  const row = page.getByRole('row').filter({ hasText: name });
  await expect(row).toContainText('exactly once');
  await expect(row).toContainText('order_id, amount_cents');
  await expect(row).toContainText('20 s');
  await screenshot(page, 'admin-tools');

  await row.getByRole('button', { name: `Edit ${name}` }).click();
  const edit = page.getByRole('form', { name: 'Edit tool' });
  await expect(edit.getByLabel('Name')).toHaveValue(name);
  await expect(edit.getByLabel('Key fields')).toHaveValue('order_id, amount_cents');
  await edit.getByLabel('Effect').selectOption('irreversible');
  await edit.getByRole('button', { name: 'Save tool' }).click();
  await expect(page.getByRole('status')).toHaveText(`Registered ${name}.`);
  await expect(page.getByRole('row').filter({ hasText: name })).toContainText('at most once approved');
  // The two refused submissions were answered 400, which the browser logs by itself.
  expect(errors.filter((e) => !e.includes('status of 400 (Bad Request)'))).toEqual([]);
});

test('someone who is not an admin sees no Admin link and is refused', async ({ page }) => {
  const operator = await createPerson('operator');
  await signIn(page, operator.username, operator.password);
  await expect(page.getByRole('link', { name: 'Tools' })).toBeVisible();
  await expect(page.getByRole('link', { name: 'Admin' })).toHaveCount(0);

  await openLive(page, '/admin');
  const errors = consoleErrors(page);
  await expect(page.getByRole('alert')).toContainText('Your role does not allow this');
  await expect(page.getByRole('form', { name: 'Create an API key' })).toHaveCount(0);
  const forged = await page.request.post('/api/create_api_key', { form: { namespace: 'stolen' } });
  expect(forged.status()).toBe(403);

  await openLive(page, '/tools');
  await expect(page.getByRole('button', { name: 'Register a tool' })).toHaveCount(0);
  await expect(page.getByRole('button', { name: /^Edit / })).toHaveCount(0);
  expect(errors).toEqual([]);
});
