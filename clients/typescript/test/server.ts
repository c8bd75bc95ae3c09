// A real idem server for the tests: the binary the build made (`IDEM_BIN`, default
// target/release/idem), on a fresh SQLite file and a random port; an admin signed in for
// what people do (register tools, approve, reject).

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const ADMIN = "ts-admin";
const PASSWORD = "ts-admin-password-1";

export class TestServer {
  private constructor(
    readonly baseUrl: string,
    private readonly process: ChildProcess,
    private readonly dir: string,
    private readonly cookie: string,
  ) {}

  static async start(env: Record<string, string> = {}): Promise<TestServer> {
    const binary = process.env.IDEM_BIN ?? resolve(__dirname, "../../../target/release/idem");
    const dir = mkdtempSync(join(tmpdir(), "idem-ts-"));
    const database = `sqlite://${join(dir, "idem.db")}`;
    execFileSync(binary, ["users", "create", "--username", ADMIN, "--role", "admin", "--password-stdin", "--database-url", database], {
      input: `${PASSWORD}\n`,
    });
    const child = spawn(binary, ["serve", "--bind", "127.0.0.1:0", "--database-url", database], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    const address = await new Promise<string>((done, failed) => {
      const lines = createInterface({ input: child.stderr! });
      const timer = setTimeout(() => failed(new Error("idem did not start")), 30_000);
      lines.on("line", (line) => {
        const found = /idem is listening address=(\S+)/.exec(line);
        if (found) {
          clearTimeout(timer);
          done(found[1]!);
        }
      });
    });
    const baseUrl = `http://${address}`;
    const login = await fetch(`${baseUrl}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: ADMIN, password: PASSWORD }),
    });
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!;
    return new TestServer(baseUrl, child, dir, cookie);
  }

  /** A fresh API key of a namespace of its own, made by the admin as the dashboard does. */
  async newKey(): Promise<string> {
    const namespace = `ts-${Math.random().toString(36).slice(2, 10)}`;
    const created = (await this.asAdmin("POST", "/v1/keys", { namespace })) as { key: string };
    return created.key;
  }

  /** What a person does in the dashboard, as the admin. */
  async asAdmin(method: string, path: string, body: unknown = {}): Promise<unknown> {
    const answer = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { cookie: this.cookie, origin: this.baseUrl, "content-type": "application/json" },
      body: method === "GET" ? undefined : JSON.stringify(body),
    });
    if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status} ${await answer.text()}`);
    return answer.json();
  }

  async stop(): Promise<void> {
    this.process.kill("SIGTERM");
    await new Promise((done) => this.process.once("exit", done));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function uniqueTool(): string {
  return `ts_${Math.random().toString(36).slice(2, 12)}`;
}
