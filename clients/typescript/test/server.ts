// A real idem server for the tests: the binary the build made (`IDEM_BIN`, default
// target/release/idem), on a fresh SQLite file and a random port, and its sandbox provider
// (the fake payments service whose effects the tests count); an admin signed in for what
// people do (register tools, create people), and people of other roles signed in as asked.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const ADMIN = "ts-admin";
const PASSWORD = "ts-admin-password-1";

/** A person signed in to idem, acting through its HTTP API as the dashboard does. */
export class Person {
  constructor(
    readonly baseUrl: string,
    readonly username: string,
    private readonly cookie: string,
  ) {}

  /** Signs `username` in (`POST /auth/login`). */
  static async signIn(baseUrl: string, username: string, password: string): Promise<Person> {
    const login = await fetch(`${baseUrl}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username, password }),
    });
    if (!login.ok) throw new Error(`${username} could not sign in: ${login.status} ${await login.text()}`);
    return new Person(baseUrl, username, (login.headers.get("set-cookie") ?? "").split(";")[0]!);
  }

  /** One request with this person's session; throws on an answer that is not a success. */
  async send(method: string, path: string, body: unknown = {}): Promise<unknown> {
    const answer = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { cookie: this.cookie, origin: this.baseUrl, "content-type": "application/json" },
      body: method === "GET" ? undefined : JSON.stringify(body),
    });
    if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status} ${await answer.text()}`);
    return answer.json();
  }

  /** `POST /v1/operations/{id}/approve`. */
  async approve(operationId: string, reason?: string): Promise<void> {
    await this.send("POST", `/v1/operations/${operationId}/approve`, reason === undefined ? {} : { reason });
  }

  /** `POST /v1/operations/{id}/reject`. */
  async reject(operationId: string, reason: string): Promise<void> {
    await this.send("POST", `/v1/operations/${operationId}/reject`, { reason });
  }
}

export class TestServer {
  private constructor(
    readonly baseUrl: string,
    readonly sandboxUrl: string,
    readonly admin: Person,
    private readonly processes: ChildProcess[],
    private readonly dir: string,
  ) {}

  static async start(env: Record<string, string> = {}): Promise<TestServer> {
    const binary = process.env.IDEM_BIN ?? resolve(__dirname, "../../../target/release/idem");
    const dir = mkdtempSync(join(tmpdir(), "idem-ts-"));
    const database = `sqlite://${join(dir, "idem.db")}`;
    execFileSync(binary, ["users", "create", "--username", ADMIN, "--role", "admin", "--password-stdin", "--database-url", database], {
      input: `${PASSWORD}\n`,
    });
    const idem = spawn(binary, ["serve", "--bind", "127.0.0.1:0", "--database-url", database], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    const sandbox = spawn(binary, ["sandbox-provider", "--bind", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "ignore"] });
    const [address, sandboxAddress] = await Promise.all([
      listeningAddress(idem, idem.stderr!, /idem is listening address=(\S+)/),
      listeningAddress(sandbox, sandbox.stdout!, /sandbox provider listening on http:\/\/(\S+)/),
    ]);
    const baseUrl = `http://${address}`;
    const admin = await Person.signIn(baseUrl, ADMIN, PASSWORD);
    return new TestServer(baseUrl, `http://${sandboxAddress}`, admin, [idem, sandbox], dir);
  }

  /** A fresh API key of a namespace of its own, made by the admin as the dashboard does. */
  async newKey(): Promise<string> {
    const namespace = `ts-${Math.random().toString(36).slice(2, 10)}`;
    const created = (await this.asAdmin("POST", "/v1/keys", { namespace })) as { key: string };
    return created.key;
  }

  /** What a person does in the dashboard, as the admin. */
  asAdmin(method: string, path: string, body: unknown = {}): Promise<unknown> {
    return this.admin.send(method, path, body);
  }

  /** A new person with `role` (`POST /v1/users` by the admin), signed in. */
  async newPerson(role: "viewer" | "operator" | "approver" | "admin"): Promise<Person> {
    const username = `${role}-${Math.random().toString(36).slice(2, 8)}`;
    const password = `${username}-long-password`;
    await this.asAdmin("POST", "/v1/users", { username, role, password });
    return Person.signIn(this.baseUrl, username, password);
  }

  /** The ids of the operations of `tool` that wait for a person, as the approvals page lists them. */
  async waitingForApproval(tool: string): Promise<string[]> {
    const listed = (await this.asAdmin("GET", `/v1/operations?status=awaiting_approval&tool=${tool}`)) as {
      operations: { id: string }[];
    };
    return listed.operations.map((operation) => operation.id);
  }

  /** The status of operation `operationId` now, as an admin reads it. */
  async statusOf(operationId: string): Promise<string> {
    const read = (await this.asAdmin("GET", `/v1/operations/${operationId}`)) as { operation: { status: string } };
    return read.operation.status;
  }

  /** A side effect at the sandbox provider; without a key, every call commits a new one. */
  async act(action: string, body: unknown): Promise<{ id: string; provider_ref: string }> {
    const answer = await fetch(`${this.sandboxUrl}/actions/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!answer.ok) throw new Error(`sandbox ${action}: ${answer.status} ${await answer.text()}`);
    return (await answer.json()) as { id: string; provider_ref: string };
  }

  /** How many effects the sandbox provider committed for `action`. */
  async effects(action: string): Promise<number> {
    const answer = (await (await fetch(`${this.sandboxUrl}/_effects`)).json()) as { effects: { name: string }[] };
    return answer.effects.filter((effect) => effect.name === action).length;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.processes.map((child) => {
        if (child.exitCode !== null || child.signalCode !== null) return undefined;
        const exited = new Promise((done) => child.once("exit", done));
        child.kill("SIGTERM");
        return exited;
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The address a starting process announces on `output`, found by `pattern`. */
function listeningAddress(child: ChildProcess, output: NodeJS.ReadableStream, pattern: RegExp): Promise<string> {
  return new Promise<string>((done, failed) => {
    const lines = createInterface({ input: output });
    const timer = setTimeout(() => failed(new Error(`${child.spawnfile} did not start`)), 30_000);
    child.once("exit", (code) => failed(new Error(`${child.spawnfile} exited (${code}) before listening`)));
    lines.on("line", (line) => {
      const found = pattern.exec(line);
      if (found) {
        clearTimeout(timer);
        done(found[1]!);
      }
    });
  });
}

export function uniqueTool(): string {
  return `ts_${Math.random().toString(36).slice(2, 12)}`;
}
