// The Vercel AI SDK's real generateText loop with its mock language model (scripted: it calls
// the tool once, then answers with what the tool said), tools wrapped by withIdem, a real idem.

import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { idemApprovalResponses, idemToolApproval, withIdem } from "../src/ai-sdk.js";
import { TestServer, uniqueTool } from "./server.js";

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => {
  await server.stop();
});

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A model that calls `toolName` with `input`, then repeats the tool's output as its answer. */
function scriptedModel(toolName: string, input: unknown, seen: unknown[]) {
  return new MockLanguageModelV4({
    doGenerate: async (options) => {
      const last = options.prompt[options.prompt.length - 1];
      if (last?.role === "tool") {
        const { output } = last.content[0] as { output: { value?: unknown } };
        // A denied call's output is `{ type: "execution-denied", reason }`, without a value.
        const told = "value" in output ? output.value : output;
        seen.push(told);
        return { content: [{ type: "text", text: JSON.stringify(told) }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      const call = { type: "tool-call" as const, toolCallId: `call-${seen.length}`, toolName, input: JSON.stringify(input) };
      return { content: [call], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
    },
  });
}

/** A refund tool that notes each order it refunds in `calls`. */
function refundTool(calls: string[]) {
  return tool({
    description: "Refunds an order",
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (args) => {
      calls.push(args.orderId);
      return { refundId: `re_${args.orderId}` };
    },
  });
}

/** One agent turn: the model asks for a refund of `input`, through idem. */
async function refundTurn(idem: Idem, name: string, input: { orderId: string; cents: number }, seen: unknown[], calls: string[]) {
  const refund = tool({
    description: "Refunds an order",
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (args) => {
      calls.push(args.orderId);
      return { refundId: `re_${args.orderId}`, cents: args.cents };
    },
  });
  const tools = withIdem(idem, { [name]: refund }, { keys: { [name]: (args) => `refund:${args.orderId}` } });
  return generateText({ model: scriptedModel(name, input, seen), tools, prompt: "refund it", stopWhen: stepCountIs(3) });
}

describe("withIdem on the AI SDK", () => {
  it("acts once across a retried run, and the model reads the note", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const seen: unknown[] = [];
    const calls: string[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      await idem.run("ai-run-1", () => refundTurn(idem, name, { orderId: "1234", cents: 500 }, seen, calls));
    }
    expect(calls).toEqual(["1234"]);
    expect(seen[0]).toEqual({ refundId: "re_1234", cents: 500 });
    expect(seen[1]).toMatchObject({ result: { refundId: "re_1234", cents: 500 } });
    expect((seen[1] as { note: string }).note).toMatch(/no new action taken/);
  });

  it("tells the model a reused key with other arguments was refused", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const seen: unknown[] = [];
    const calls: string[] = [];
    await idem.run("ai-run-2", () => refundTurn(idem, name, { orderId: "77", cents: 500 }, seen, calls));
    await idem.run("ai-run-3", () => refundTurn(idem, name, { orderId: "77", cents: 900 }, seen, calls));
    expect(calls).toEqual(["77"]);
    expect(String(seen[1])).toMatch(/^Not done/);
  });

  it("holds an irreversible tool for a person, runs it once approved, and passes a rejection on", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const seen: unknown[] = [];
    const calls: string[] = [];
    const turn = (orderId: string) => idem.run(`ai-${orderId}`, () => refundTurn(idem, name, { orderId, cents: 5 }, seen, calls));

    await turn("a-1");
    expect(String(seen[0])).toMatch(/needs a person's approval in idem/);
    expect(calls).toEqual([]);
    // The operation's id, from the dashboard link the model was given.
    const id = String(seen[0]).match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${id}/approve`, { reason: "checked" });
    await turn("a-1");
    await turn("a-1");
    expect(calls).toEqual(["a-1"]);

    await turn("a-2");
    const second = String(seen[seen.length - 1]).match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${second}/reject`, { reason: "customer already refunded" });
    await turn("a-2");
    expect(String(seen[seen.length - 1])).toMatch(/customer already refunded/);
    expect(calls).toEqual(["a-1"]);
  });

  it("pauses the run in the AI SDK's own approval flow until a person decides in idem", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const keys = { [name]: (args: Record<string, unknown>) => `refund:${args.orderId}` };
    const calls: string[] = [];
    const refund = refundTool(calls);
    const tools = withIdem(idem, { [name]: refund }, { keys });
    const prompt = [{ role: "user" as const, content: "refund it" }];

    /** A turn that asks idem before the tool runs, and its resumption with `responses`. */
    const turn = (orderId: string, seen: unknown[]) =>
      generateText({
        model: scriptedModel(name, { orderId, cents: 5 }, seen),
        tools,
        messages: prompt,
        toolApproval: idemToolApproval(idem, { keys }),
        stopWhen: stepCountIs(3),
      });
    const resume = (paused: Awaited<ReturnType<typeof turn>>, responses: unknown[], seen: unknown[]) =>
      generateText({
        model: scriptedModel(name, {}, seen),
        tools,
        messages: [...prompt, ...paused.response.messages, { role: "tool", content: responses as never }],
        stopWhen: stepCountIs(3),
      });
    const requestOf = (paused: Awaited<ReturnType<typeof turn>>) => {
      const request = paused.content.find((part) => part.type === "tool-approval-request");
      expect(request, "the run paused for approval").toBeDefined();
      return request as unknown as { approvalId: string; reason: string };
    };

    const seen: unknown[] = [];
    const paused = await idem.run("ai-approval-1", () => turn("p-1", seen));
    const request = requestOf(paused);
    expect(request.reason).toMatch(/waits for a person's approval in idem/);
    expect(calls).toEqual([]);
    expect(seen, "the model is not called again while the run waits").toEqual([]);
    expect(await idemApprovalResponses(idem, paused.content, { keys }), "nobody decided yet").toEqual([]);

    const id = request.reason.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${id}/approve`, { reason: "checked" });
    const responses = await idemApprovalResponses(idem, paused.content, { keys });
    expect(responses).toEqual([{ type: "tool-approval-response", approvalId: request.approvalId, approved: true }]);
    await resume(paused, responses, seen);
    expect(calls).toEqual(["p-1"]);
    expect(seen[0]).toEqual({ refundId: "re_p-1" });
    // The same resumption again (a retried process): idem replays, the refund is not repeated.
    await resume(paused, responses, seen);
    expect(calls).toEqual(["p-1"]);
    expect((seen[1] as { note: string }).note).toMatch(/no new action taken/);

    const denied: unknown[] = [];
    const second = await idem.run("ai-approval-2", () => turn("p-2", denied));
    const secondId = requestOf(second).reason.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${secondId}/reject`, { reason: "customer already refunded" });
    const refusals = await idemApprovalResponses(idem, second.content, { keys });
    expect(refusals).toMatchObject([{ approved: false, reason: expect.stringMatching(/customer already refunded/) }]);
    await resume(second, refusals, denied);
    expect(JSON.stringify(denied[0])).toMatch(/customer already refunded/);
    expect(calls).toEqual(["p-1"]);
    // Asked again in a new run, the rejected call is denied at once, never paused.
    const again = await idem.run("ai-approval-3", () => turn("p-2", denied));
    const asked = again.content.filter((part) => part.type === "tool-approval-request") as unknown as { isAutomatic?: boolean }[];
    expect(asked.every((part) => part.isAutomatic), "denied by idem's answer, not asked of anyone").toBe(true);
    expect(JSON.stringify(denied[1])).toMatch(/customer already refunded/);
    expect(calls).toEqual(["p-1"]);
  });

  it("answers a tool's own needsApproval from idem (AI SDK 6's way)", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const calls: string[] = [];
    const refund = refundTool(calls);
    const keys = { [name]: (args: Record<string, unknown>) => `refund:${args.orderId}` };
    const tools = withIdem(idem, { [name]: refund }, { keys, needsApproval: true });
    const seen: unknown[] = [];
    const turn = () =>
      idem.run("ai-needs-approval", () =>
        generateText({ model: scriptedModel(name, { orderId: "n-1", cents: 5 }, seen), tools, prompt: "refund it", stopWhen: stepCountIs(3) }),
      );

    const paused = await turn();
    const request = paused.content.find((part) => part.type === "tool-approval-request");
    expect(request, "the run paused for approval").toBeDefined();
    expect(calls).toEqual([]);
    const listed = (await server.asAdmin("GET", `/v1/operations?status=awaiting_approval&tool=${name}`)) as {
      operations: { id: string }[];
    };
    expect(listed.operations).toHaveLength(1);
    await server.asAdmin("POST", `/v1/operations/${listed.operations[0]!.id}/approve`, {});
    // The run again from the start: idem now says no approval is needed, and the tool runs once.
    await turn();
    await turn();
    expect(calls).toEqual(["n-1"]);
  });
});
