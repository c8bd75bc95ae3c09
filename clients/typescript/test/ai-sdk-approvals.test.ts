// The AI SDK's own approval flow answered by idem: the real generateText loop with a scripted
// model pauses at an irreversible refund (a `tool-approval-request`), an approver signed in to
// idem decides through its HTTP API, and the run resumes. The refund acts at the sandbox
// provider, which counts what was really done.

import { generateText, stepCountIs, tool, type ModelMessage } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { idemApprovalResponses, idemToolApproval, withIdem } from "../src/ai-sdk.js";
import { scriptedLanguageModel } from "./scripted.js";
import { TestServer, uniqueTool, type Person } from "./server.js";

let server: TestServer;
let approver: Person;
beforeAll(async () => {
  server = await TestServer.start();
  approver = await server.newPerson("approver");
});
afterAll(async () => {
  await server.stop();
});

const prompt: ModelMessage[] = [{ role: "user", content: "refund it" }];

/**
 * An agent with one irreversible refund tool `name`, acting at the sandbox provider, guarded
 * by `idem`: a turn asks idem before the tool runs (AI SDK 7's `toolApproval`, or the tool's
 * own `needsApproval`), and a resumption answers the paused run with `responses`.
 */
async function refundAgent(idem: Idem, name: string, options: { needsApproval?: boolean } = {}) {
  await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
  const keys = { [name]: (input: Record<string, unknown>) => `refund:${input.orderId}` };
  const refund = tool({
    description: "Refunds an order",
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (input) => ({ refundId: (await server.act(name, input)).id }),
  });
  const tools = withIdem(idem, { [name]: refund }, { keys, needsApproval: options.needsApproval });
  const toolApproval = options.needsApproval ? undefined : idemToolApproval(idem, { keys });
  return {
    keys,
    turn: (orderId: string, seen: unknown[]) =>
      generateText({ model: scriptedLanguageModel(name, { orderId, cents: 5 }, seen), tools, messages: prompt, toolApproval, stopWhen: stepCountIs(3) }),
    resume: (history: ModelMessage[], responses: unknown[], seen: unknown[]) =>
      generateText({
        model: scriptedLanguageModel(name, {}, seen),
        tools,
        messages: [...history, { role: "tool", content: responses as never }],
        stopWhen: stepCountIs(3),
      }),
  };
}

/** The operation a paused run waits on, from its request's reason (the dashboard link). */
function operationIn(paused: { content: ReadonlyArray<{ type: string }> }): string {
  const request = paused.content.find((part) => part.type === "tool-approval-request") as { reason?: string } | undefined;
  expect(request, "the run paused for approval").toBeDefined();
  expect(request!.reason).toMatch(/waits for a person's approval in idem/);
  return request!.reason!.match(/operations\/([0-9a-f-]{36})/)![1]!;
}

describe("the AI SDK's approval flow answered by idem", () => {
  it("pauses until an approver approves in idem, then refunds once, also when resumed twice", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const agent = await refundAgent(idem, name);
    const seen: unknown[] = [];

    const paused = await idem.run("ai-approve", () => agent.turn("p-1", seen));
    const id = operationIn(paused);
    expect(await server.waitingForApproval(name), "on the approvals page").toEqual([id]);
    expect(seen, "the model is not called again while the run waits").toEqual([]);
    expect(await idemApprovalResponses(idem, paused.content, { keys: agent.keys }), "nobody decided yet").toEqual([]);

    await approver.approve(id, "checked the order");
    const responses = await idemApprovalResponses(idem, paused.content, { keys: agent.keys });
    const approvalId = (paused.content.find((part) => part.type === "tool-approval-request") as { approvalId: string }).approvalId;
    expect(responses).toEqual([{ type: "tool-approval-response", approvalId, approved: true }]);
    expect(await server.statusOf(id), "asking took no lease").toBe("approved");
    expect(await server.effects(name)).toBe(0);

    const history = [...prompt, ...paused.response.messages];
    await agent.resume(history, responses, seen);
    expect(await server.effects(name)).toBe(1);
    expect(seen[0]).toEqual({ refundId: expect.stringMatching(/^eff_/) });
    expect(await server.statusOf(id)).toBe("succeeded");
    // The same resumption again (a retried process): idem replays, nothing is refunded again.
    await agent.resume(history, responses, seen);
    expect(await server.effects(name)).toBe(1);
    expect((seen[1] as { note: string }).note).toMatch(/no new action taken/);
  });

  it("gives the model an approver's rejection with who and why, and refunds nothing", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const agent = await refundAgent(idem, name);
    const seen: unknown[] = [];

    const paused = await idem.run("ai-reject", () => agent.turn("p-2", seen));
    await approver.reject(operationIn(paused), "customer already refunded");
    const refusals = await idemApprovalResponses(idem, paused.content, { keys: agent.keys });
    const why = new RegExp(`rejected by ${approver.username} .*customer already refunded`);
    expect(refusals).toMatchObject([{ approved: false, reason: expect.stringMatching(why) }]);
    await agent.resume([...prompt, ...paused.response.messages], refusals, seen);
    expect(JSON.stringify(seen[0])).toMatch(why);

    // Asked again in a new run, the rejected call is denied at once, never paused.
    const again = await idem.run("ai-reject-again", () => agent.turn("p-2", seen));
    const requests = again.content.filter((part) => part.type === "tool-approval-request") as { isAutomatic?: boolean }[];
    expect(requests.every((part) => part.isAutomatic), "denied by idem's answer, not asked of anyone").toBe(true);
    expect(JSON.stringify(seen[1])).toMatch(why);
    expect(await server.effects(name)).toBe(0);
  });

  it("resumes from the stored messages in another process once approved, and refunds once", async () => {
    const apiKey = await server.newKey();
    const name = uniqueTool();
    const first = new Idem({ baseUrl: server.baseUrl, apiKey });
    const paused = await first.run("ai-elsewhere", async () => (await refundAgent(first, name)).turn("p-3", []));
    // What the application keeps while a person decides: the conversation, as JSON.
    const stored = JSON.stringify([...prompt, ...paused.response.messages]);
    await approver.approve(operationIn(paused));

    const later = new Idem({ baseUrl: server.baseUrl, apiKey });
    const agent = await refundAgent(later, name);
    const history = JSON.parse(stored) as ModelMessage[];
    const responses = await idemApprovalResponses(later, history, { keys: agent.keys });
    expect(responses).toMatchObject([{ type: "tool-approval-response", approved: true }]);
    const seen: unknown[] = [];
    await agent.resume(history, responses, seen);
    expect(seen[0]).toEqual({ refundId: expect.stringMatching(/^eff_/) });
    expect(await server.effects(name)).toBe(1);
    expect(await idemApprovalResponses(later, [...history, { role: "tool", content: responses as never }]), "answered already").toEqual([]);
  });

  it("answers a tool's own needsApproval from idem (AI SDK 6's way), run keys and all", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const agent = await refundAgent(idem, name, { needsApproval: true });
    const seen: unknown[] = [];
    /** The run from its start, as a harness retries it: the same run id, the same steps. */
    const run = (runId: string, orderId: string) => idem.run(runId, () => agent.turn(orderId, seen));

    const paused = await run("ai-needs-approval", "n-1");
    expect(paused.content.some((part) => part.type === "tool-approval-request"), "the run paused for approval").toBe(true);
    const [id] = await server.waitingForApproval(name);
    await approver.approve(id!);
    await run("ai-needs-approval", "n-1");
    await run("ai-needs-approval", "n-1");
    expect(await server.effects(name)).toBe(1);
    expect((seen[1] as { note: string }).note).toMatch(/no new action taken/);

    await run("ai-needs-rejection", "n-2");
    const [rejected] = await server.waitingForApproval(name);
    await approver.reject(rejected!, "over the limit");
    // Not paused again: the guarded execution answers the rejection, which the model reads.
    const told = await run("ai-needs-rejection", "n-2");
    expect(told.content.some((part) => part.type === "tool-approval-request")).toBe(false);
    expect(String(seen[seen.length - 1])).toMatch(new RegExp(`Not done.*rejected by ${approver.username} .*over the limit`));
    expect(await server.effects(name)).toBe(1);
  });
});
