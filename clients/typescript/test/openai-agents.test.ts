// The OpenAI Agents SDK's real Runner with a scripted Model (it calls the tool once, then
// answers with what the tool said), tools wrapped by withIdem, a real idem.

import { Agent, Runner, setTracingDisabled, tool, Usage, type Model, type ModelRequest } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { decideFromIdem, withIdem } from "../src/openai-agents.js";
import { TestServer, uniqueTool } from "./server.js";

setTracingDisabled(true);

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => {
  await server.stop();
});

/** Calls `name` with `args`, then answers with the tool's output, which it notes in `seen`. */
function scriptedModel(name: string, args: unknown, seen: string[]): Model {
  return {
    async getResponse(request: ModelRequest) {
      const input = Array.isArray(request.input) ? request.input : [];
      const result = input.filter((item) => item.type === "function_call_result").pop() as
        | { output: { text?: string } | string }
        | undefined;
      if (result) {
        const text = typeof result.output === "string" ? result.output : (result.output.text ?? "");
        seen.push(text);
        return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }] };
      }
      const call = { type: "function_call", callId: `c-${seen.length}`, name, arguments: JSON.stringify(args), status: "completed" };
      return { usage: new Usage(), output: [call] } as never;
    },
    async *getStreamedResponse() {
      throw new Error("not used");
    },
  };
}

/** A refund tool named `name` that notes each order it refunds in `calls`. */
function refundTool(name: string, calls: string[]) {
  return tool({
    name,
    description: "Refunds an order",
    parameters: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (input) => {
      calls.push(input.orderId);
      return { refundId: `re_${input.orderId}`, cents: input.cents };
    },
  });
}

async function refundTurn(idem: Idem, name: string, args: { orderId: string; cents: number }, seen: string[], calls: string[]) {
  const refund = refundTool(name, calls);
  const tools = withIdem(idem, [refund], { keys: { [name]: (input) => `refund:${input.orderId}` } });
  const agent = new Agent({ name: "support", model: scriptedModel(name, args, seen), tools });
  return new Runner().run(agent, "refund it");
}

describe("withIdem on the OpenAI Agents SDK", () => {
  it("acts once across a retried run, and the model reads the note", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const seen: string[] = [];
    const calls: string[] = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      await idem.run("oa-run-1", () => refundTurn(idem, name, { orderId: "9", cents: 500 }, seen, calls));
    }
    expect(calls).toEqual(["9"]);
    expect(seen[1]).toMatch(/no new action taken\. Stored result: .*re_9/);
  });

  it("waits for a person on an irreversible tool, and passes a rejection's reason on", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const seen: string[] = [];
    const calls: string[] = [];
    const turn = (orderId: string) => idem.run(`oa-${orderId}`, () => refundTurn(idem, name, { orderId, cents: 5 }, seen, calls));
    await turn("b-1");
    expect(seen[0]).toMatch(/needs a person's approval in idem/);
    const id = seen[0]!.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${id}/approve`, { reason: "fine" });
    await turn("b-1");
    expect(calls).toEqual(["b-1"]);
    await turn("b-2");
    const second = seen[seen.length - 1]!.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await server.asAdmin("POST", `/v1/operations/${second}/reject`, { reason: "duplicate request" });
    await turn("b-2");
    expect(seen[seen.length - 1]).toMatch(/duplicate request/);
    expect(calls).toEqual(["b-1"]);
  });

  it("interrupts the run in the SDK's own approval flow until a person decides in idem", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const keys = { [name]: (input: Record<string, unknown>) => `refund:${input.orderId}` };
    const calls: string[] = [];
    const tools = withIdem(idem, [refundTool(name, calls)], { keys, needsApproval: true });
    const runner = new Runner();
    const waitingId = async () => {
      const listed = (await server.asAdmin("GET", `/v1/operations?status=awaiting_approval&tool=${name}`)) as {
        operations: { id: string }[];
      };
      expect(listed.operations).toHaveLength(1);
      return listed.operations[0]!.id;
    };

    const seen: string[] = [];
    const agent = new Agent({ name: "support", model: scriptedModel(name, { orderId: "i-1", cents: 5 }, seen), tools });
    const first = await idem.run("oa-approval-1", () => runner.run(agent, "refund it"));
    expect(first.interruptions).toHaveLength(1);
    expect(calls).toEqual([]);
    expect(await decideFromIdem(idem, first, { keys }), "nobody decided yet").toBe(1);
    await server.asAdmin("POST", `/v1/operations/${await waitingId()}/approve`, { reason: "checked" });
    expect(await decideFromIdem(idem, first, { keys })).toBe(0);
    const resumed = await idem.run("oa-approval-1", () => runner.run(agent, first.state));
    expect(resumed.interruptions ?? []).toHaveLength(0);
    expect(calls).toEqual(["i-1"]);
    expect(seen[0]).toMatch(/re_i-1/);

    const denied: string[] = [];
    const other = new Agent({ name: "support", model: scriptedModel(name, { orderId: "i-2", cents: 5 }, denied), tools });
    const second = await idem.run("oa-approval-2", () => runner.run(other, "refund it"));
    expect(second.interruptions).toHaveLength(1);
    await server.asAdmin("POST", `/v1/operations/${await waitingId()}/reject`, { reason: "customer already refunded" });
    expect(await decideFromIdem(idem, second, { keys })).toBe(0);
    await idem.run("oa-approval-2", () => runner.run(other, second.state));
    expect(denied[0]).toMatch(/customer already refunded/);
    expect(calls).toEqual(["i-1"]);
  });
});
