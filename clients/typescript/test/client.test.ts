// The client and the guard against a real idem server (no mocked idem, no faked HTTP).

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  AwaitingApproval,
  Idem,
  IdemUnavailable,
  InProgress,
  KeyReused,
  OutcomeUnknown,
  PermanentFailure,
  RateLimited,
  Rejected,
  type GuardResult,
} from "../src/index.js";
import { TestServer, uniqueTool } from "./server.js";

let server: TestServer;

beforeAll(async () => {
  server = await TestServer.start();
});

afterAll(async () => {
  await server.stop();
});

async function client(): Promise<Idem> {
  return new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey(), inProgressWaitSeconds: 1 });
}

describe("the low-level client", () => {
  it("claims, completes, and replays with the note", async () => {
    const idem = await client();
    const tool = uniqueTool();
    const claimed = await idem.claim(tool, { order: 1 }, { key: "k-1" });
    expect(claimed.status).toBe(201);
    expect(claimed.lease?.token).toBeTruthy();
    expect(claimed.operation.provider_key).toBe(`idem_${claimed.operation.id}`);
    const done = await idem.complete(claimed.operation.id, claimed.lease!.token, { refund: "re_1" });
    expect(done.status).toBe("succeeded");
    const again = await idem.claim(tool, { order: 1 }, { key: "k-1" });
    expect(again.status).toBe(200);
    expect(again.replayed).toBe(true);
    expect(again.note).toMatch(/no new action taken/);
    expect(again.operation.result).toEqual({ refund: "re_1" });
    expect((await idem.get(claimed.operation.id)).status).toBe("succeeded");
  });

  it("refuses a reused key, and a duplicate in flight, each with its error", async () => {
    const idem = await client();
    const tool = uniqueTool();
    await idem.claim(tool, { n: 1 }, { key: "k-2" });
    await expect(idem.claim(tool, { n: 2 }, { key: "k-2" })).rejects.toBeInstanceOf(KeyReused);
    const busy = await idem.claim(tool, { n: 1 }, { key: "k-2" }).catch((error) => error);
    expect(busy).toBeInstanceOf(InProgress);
    expect(busy.code).toBe("operation_in_progress");
  });

  it("says when a person must approve, and who rejected and why", async () => {
    const idem = await client();
    const tool = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${tool}`, { effect: "irreversible" });
    const waiting = await idem.claim(tool, { to: "DE89" }, { key: "w-1" }).catch((error) => error);
    expect(waiting).toBeInstanceOf(AwaitingApproval);
    expect(waiting.dashboardUrl).toBe(`${server.baseUrl}/operations/${waiting.operationId}`);
    await server.asAdmin("POST", `/v1/operations/${waiting.operationId}/reject`, { reason: "not this month" });
    const guarded = idem.guard(tool, async (wire: { to: string }) => wire.to, { key: () => "w-1" });
    const rejected = await guarded({ to: "DE89" }).catch((error) => error);
    expect(rejected).toBeInstanceOf(Rejected);
    expect(rejected.message).toMatch(/not this month/);
  });
});

describe("the guard", () => {
  it("acts once in a run run twice, and replays the stored result with the note", async () => {
    const idem = await client();
    const tool = uniqueTool();
    const calls: string[] = [];
    const sendEmail = idem.guard(
      tool,
      async (email: { to: string; body: string }) => {
        calls.push(email.to);
        return { sent: email.to };
      },
      { withNote: true },
    );
    const first = (await idem.run("run-42", () => sendEmail({ to: "a@example.com", body: "hi" }))) as GuardResult<unknown>;
    const second = (await idem.run("run-42", () => sendEmail({ to: "a@example.com", body: "hi" }))) as GuardResult<unknown>;
    expect(calls).toEqual(["a@example.com"]);
    expect(first.replayed).toBe(false);
    expect(second.replayed).toBe(true);
    expect(second.value).toEqual({ sent: "a@example.com" });
    expect(second.note).toMatch(/already completed at step 0/);
  });

  it("numbers the steps of a run, so a resumed run reproduces its keys", async () => {
    const idem = await client();
    const tool = uniqueTool();
    const calls: number[] = [];
    const charge = idem.guard(tool, async (charge: { n: number }) => {
      calls.push(charge.n);
      return charge.n;
    });
    const workflow = async () => [await charge({ n: 1 }), await charge({ n: 1 })];
    expect(await idem.run("run-steps", workflow)).toEqual([1, 1]);
    expect(await idem.run("run-steps", workflow)).toEqual([1, 1]);
    expect(calls).toEqual([1, 1]); // two steps, each acted once
  });

  it("stores a permanent failure and throws it again without calling", async () => {
    const idem = await client();
    const tool = uniqueTool();
    let calls = 0;
    const pay = idem.guard(tool, async (_: { card: string }) => {
      calls += 1;
      throw new PermanentFailure("card_declined", "the card was declined");
    });
    for (let attempt = 0; attempt < 2; attempt++) {
      const failed = await idem.run("run-pay", () => pay({ card: "4000" })).catch((error) => error);
      expect(failed).toBeInstanceOf(PermanentFailure);
      expect(failed.code).toBe("card_declined");
    }
    expect(calls).toBe(1);
  });

  it("reports a timeout as unknown and never runs that call again", async () => {
    const idem = await client();
    const tool = uniqueTool();
    let calls = 0;
    const slow = idem.guard(tool, async (_: { n: number }) => {
      calls += 1;
      const timeout = new Error("the provider did not answer");
      timeout.name = "TimeoutError";
      throw timeout;
    });
    await expect(idem.run("run-slow", () => slow({ n: 1 }))).rejects.toBeInstanceOf(OutcomeUnknown);
    await expect(idem.run("run-slow", () => slow({ n: 1 }))).rejects.toBeInstanceOf(OutcomeUnknown);
    expect(calls).toBe(1);
  });

  it("fails closed when idem is down, and acts unrecorded when told to fail open", async () => {
    const calls: string[] = [];
    const act = async (what: { name: string }) => {
      calls.push(what.name);
      return what.name;
    };
    const closed = new Idem({ baseUrl: "http://127.0.0.1:9", apiKey: "k", timeoutMs: 1000 });
    await expect(closed.guard("t", act)({ name: "closed" })).rejects.toBeInstanceOf(IdemUnavailable);
    const question = { callId: "c-1" };
    await expect(closed.approvalState("t", { name: "closed" }, question)).rejects.toBeInstanceOf(IdemUnavailable);
    const open = new Idem({ baseUrl: "http://127.0.0.1:9", apiKey: "k", timeoutMs: 1000, onUnavailable: "fail_open" });
    expect(await open.approvalState("t", { name: "open" }, question), "no one to ask").toEqual({ decision: "no_person" });
    expect(await open.guard("t", act)({ name: "open" })).toBe("open");
    expect(calls).toEqual(["open"]);
  });
});

describe("a rate-limited key", () => {
  it("gets RateLimited with the delay, and the guard does not act", async () => {
    const limited = await TestServer.start({ IDEM_RATE_LIMIT_PER_SECOND: "1", IDEM_RATE_LIMIT_BURST: "1" });
    try {
      const idem = new Idem({ baseUrl: limited.baseUrl, apiKey: await limited.newKey() });
      const tool = uniqueTool();
      await idem.claim(tool, { n: 1 }, { key: "first" });
      const refused = await idem.claim(tool, { n: 2 }, { key: "second" }).catch((error) => error);
      expect(refused).toBeInstanceOf(RateLimited);
      expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
      let calls = 0;
      const act = idem.guard(tool, async (_: { n: number }) => (calls += 1));
      await expect(act({ n: 3 })).rejects.toBeInstanceOf(RateLimited);
      expect(calls).toBe(0);
    } finally {
      await limited.stop();
    }
  });
});
