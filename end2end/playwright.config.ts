import { defineConfig } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A free port and a fresh SQLite file per run; the server is the release build that
// `make build` leaves in target/.
const port =
  process.env.IDEM_E2E_PORT ??
  execFileSync(process.execPath, [
    '-e',
    "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})",
  ])
    .toString()
    .trim();
process.env.IDEM_E2E_PORT = port; // workers re-read this config; keep the same port
const sandboxPort =
  process.env.IDEM_E2E_SANDBOX_PORT ??
  execFileSync(process.execPath, [
    '-e',
    "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})",
  ])
    .toString()
    .trim();
process.env.IDEM_E2E_SANDBOX_PORT = sandboxPort;
const dataDir = process.env.IDEM_E2E_DATA ?? mkdtempSync(join(tmpdir(), 'idem-e2e-'));
process.env.IDEM_E2E_DATA = dataDir;

export const baseURL = `http://127.0.0.1:${port}`;
/** The sandbox provider (a fake payments/email service with fault injection). */
export const sandboxURL = `http://127.0.0.1:${sandboxPort}`;
/** idem's release binary, built by `make build` (`IDEM_E2E_BIN` overrides it). */
const idemBin = process.env.IDEM_E2E_BIN ?? './target/release/idem';
export const admin = { username: 'e2e-admin', password: 'e2e admin password' };

export default defineConfig({
  testDir: './tests',
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: !!process.env.CI,
  reporter: [['list']],
  use: {
    baseURL,
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
  },
  projects: [
    {
      name: 'chromium',
      use: {
        browserName: 'chromium',
        launchOptions: {
          executablePath: '/usr/bin/chromium',
          args: [
            '--headless',
            '--no-sandbox',
            '--disable-gpu',
            '--disable-quic',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
          ],
        },
      },
    },
  ],
  webServer: [
    {
      command: `exec ${idemBin} sandbox-provider --bind 127.0.0.1:${sandboxPort}`,
      cwd: '..',
      url: `${sandboxURL}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: 'pipe',
      stderr: 'pipe',
    },
    {
      // Creates the test admin with the CLI, then serves; Playwright waits for /healthz.
      command: `printf '%s\\n' '${admin.password}' | ${idemBin} users create --username ${admin.username} --role admin --password-stdin && exec ${idemBin} serve`,
      cwd: '..',
      url: `${baseURL}/healthz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: 'pipe',
      stderr: 'pipe',
      env: {
        IDEM_BIND: `127.0.0.1:${port}`,
        IDEM_DATABASE_URL: `sqlite://${join(dataDir, 'idem.db')}`,
        IDEM_SITE_ROOT: 'target/site',
        // Short waits, so reconciliation is seen within a test's patience.
        IDEM_RECONCILE_INTERVAL_MS: '300',
        IDEM_METRICS_ROLLUP_INTERVAL_MS: '1000',
      },
    },
  ],
});
