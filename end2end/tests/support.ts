// What the browser specs share: signing in, and driving idem's REST API (as an admin and as
// an agent) and the sandbox provider, so a spec can create the situation it then looks at.
import { expect, request, type APIRequestContext, type Page } from '@playwright/test';
import { randomUUID } from 'node:crypto';
import { admin, baseURL, sandboxURL } from '../playwright.config';

export { admin, baseURL, sandboxURL };

export type Role = 'viewer' | 'operator' | 'approver' | 'admin';

/** Opens a page and waits until the WebAssembly has taken it over (clicks before that would
 * submit plain HTML forms). */
export async function openHydrated(page: Page, path: string) {
  await page.goto(path);
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}

/** Signs in through the login form and waits for the overview. */
export async function signIn(page: Page, username: string, password: string) {
  await openHydrated(page, '/login');
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/$/);
}

/** A unique name, so specs never collide in the shared database. */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** An API client signed in as the e2e admin (session cookie kept by the context). */
export async function adminApi(): Promise<APIRequestContext> {
  const api = await request.newContext({ baseURL });
  const answer = await api.post('/auth/login', { data: admin });
  expect(answer.status(), await answer.text()).toBe(200);
  return api;
}

/** Creates a person with `role` and returns their credentials. */
export async function createPerson(role: Role): Promise<{ username: string; password: string }> {
  const api = await adminApi();
  const person = { username: unique(role), password: `${role} password ${randomUUID()}` };
  const answer = await api.post('/v1/users', { data: { ...person, role } });
  expect(answer.status(), await answer.text()).toBe(201);
  await api.dispose();
  return person;
}

/** An agent: an API client with a fresh key of a fresh namespace. */
export async function agentApi(namespace = unique('ns')): Promise<{ api: APIRequestContext; namespace: string }> {
  const adminClient = await adminApi();
  const answer = await adminClient.post('/v1/keys', { data: { namespace, name: 'e2e agent' } });
  expect(answer.status(), await answer.text()).toBe(201);
  const { key } = await answer.json();
  await adminClient.dispose();
  const api = await request.newContext({
    baseURL,
    extraHTTPHeaders: { authorization: `Bearer ${key}` },
  });
  return { api, namespace };
}

/** Registers (or replaces) a tool as the admin; `policy` is the body of `PUT /v1/tools/{name}`. */
export async function registerTool(name: string, policy: Record<string, unknown>) {
  const api = await adminApi();
  const answer = await api.put(`/v1/tools/${name}`, { data: policy });
  expect(answer.ok(), await answer.text()).toBeTruthy();
  await api.dispose();
}

/** Queues a fault at the sandbox provider (see docs/providers.md, "The sandbox provider"). */
export async function sandboxFault(fault: Record<string, unknown>) {
  const api = await request.newContext({ baseURL: sandboxURL });
  const answer = await api.post('/_faults', { data: fault });
  expect(answer.status(), await answer.text()).toBe(201);
  await api.dispose();
}

/** How many effects the sandbox committed for `key` (idem sends an operation's `provider_key`). */
export async function sandboxEffects(key: string): Promise<number> {
  const api = await request.newContext({ baseURL: sandboxURL });
  const answer = await api.get('/_effects');
  const body = await answer.json();
  await api.dispose();
  return body.by_key[key] ?? 0;
}

/** Saves a full-page screenshot under end2end/screenshots/ for a person to look at. */
export async function screenshot(page: Page, name: string) {
  await page.screenshot({ path: `screenshots/${name}.png`, fullPage: true });
}
