// People in the browser: the admin disables, enables and deletes a person from the Admin page
// (their session ends at once), and anyone changes their own password from the header.
import { expect, test } from '@playwright/test';
import { consoleErrors, openLive } from './pages';
import { admin, createPerson, signIn } from './support';

test('the admin disables a person, whose session ends, then enables and deletes them', async ({ page, browser }) => {
  const person = await createPerson('viewer');
  const context = await browser.newContext();
  const theirs = await context.newPage();
  await signIn(theirs, person.username, person.password);

  await signIn(page, admin.username, admin.password);
  await openLive(page, '/admin');
  const errors = consoleErrors(page);
  const row = () => page.getByRole('row').filter({ hasText: person.username });

  await row().getByRole('button', { name: 'Disable' }).click();
  await row().getByRole('button', { name: 'Confirm: Disable' }).click();
  await expect(row()).toContainText('disabled');
  await theirs.goto('/operations');
  await expect(theirs).toHaveURL(/\/login$/);

  await row().getByRole('button', { name: 'Enable' }).click();
  await expect(row()).toContainText('active');
  await signIn(theirs, person.username, person.password);

  await row().getByLabel(`Role of ${person.username}`).selectOption('operator');
  await row().getByRole('button', { name: 'Change role' }).click();
  await expect(row().locator('td').first()).toHaveText('operator');

  await row().getByRole('button', { name: 'Delete' }).click();
  await row().getByRole('button', { name: 'Confirm: Delete' }).click();
  await expect(row()).toHaveCount(0);
  await theirs.goto('/operations');
  await expect(theirs).toHaveURL(/\/login$/);
  await context.close();
  expect(errors).toEqual([]);
});

test('the last enabled admin cannot delete or demote themselves from the Admin page', async ({ page }) => {
  // The e2e admin is the server's only admin (it was made with the CLI before the first start).
  await signIn(page, admin.username, admin.password);
  await openLive(page, '/admin');
  const errors = consoleErrors(page);
  const self = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: admin.username, exact: true }) });

  await self.getByRole('button', { name: 'Delete' }).click();
  await self.getByRole('button', { name: 'Confirm: Delete' }).click();
  await expect(self.getByRole('alert')).toContainText('last enabled admin');
  await expect(page.getByRole('link', { name: 'Admin' })).toBeVisible();
  // The refusal was answered 409, which the browser logs by itself.
  expect(errors.filter((e) => !e.includes('status of 409 (Conflict)'))).toEqual([]);
});

test('anyone changes their own password from the header, which ends their other sessions', async ({ page, browser }) => {
  const person = await createPerson('operator');
  const context = await browser.newContext();
  const elsewhere = await context.newPage();
  await signIn(elsewhere, person.username, person.password);

  await signIn(page, person.username, person.password);
  await page.getByRole('link', { name: 'Password' }).click();
  await expect(page).toHaveURL(/\/password$/);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
  const form = page.getByRole('form', { name: 'Change your password' });
  await form.getByLabel('Current password').fill('not the password');
  await form.getByLabel('New password').fill('a brand new password');
  await form.getByRole('button', { name: 'Change password' }).click();
  await expect(form.getByRole('alert')).toContainText('current password is wrong');

  await form.getByLabel('Current password').fill(person.password);
  await form.getByRole('button', { name: 'Change password' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByText('Signed in as')).toContainText(person.username);

  await elsewhere.goto('/operations');
  await expect(elsewhere).toHaveURL(/\/login$/);
  await signIn(elsewhere, person.username, 'a brand new password');
  await context.close();
});
