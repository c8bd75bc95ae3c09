// The OpenAI Agents SDK's real Runner with a scripted Model (it calls the tool once, then
// answers with what the tool said), tools wrapped by withIdem, a real idem. The SDK's own
// approval flow answered by idem is in openai-agents-approvals.test.ts.

import { Agent, Runner, setTracingDisabled, tool } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { withIdem } from "../src/openai-agents.js";
import { scriptedAgentModel as scriptedModel } from "./scripted.js";
import { TestServer, uniqueTool } from "./server.js";

setTracingDisabled(true);

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => {
  await server.stop();
});

/** A refund tool named `name`, acting at the sandbox provider, that notes each order it refunds in `calls`. */
function refundTool(name: string, calls: string[]) {
  return tool({
    name,
    description: "Refunds an order",
    parameters: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (input) => {
      calls.push(input.orderId);
      await server.act(name, input);
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
    expect(await server.effects(name)).toBe(1);
    expect(seen[1]).toMatch(/no new action taken\. Stored result: .*re_9/);
  });

  it("waits for a person on an irreversible tool, and passes a rejection's reason on", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const approver = await server.newPerson("approver");
    const seen: string[] = [];
    const calls: string[] = [];
    const turn = (orderId: string) => idem.run(`oa-${orderId}`, () => refundTurn(idem, name, { orderId, cents: 5 }, seen, calls));
    await turn("b-1");
    expect(seen[0]).toMatch(/needs a person's approval in idem/);
    const id = seen[0]!.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await approver.approve(id, "fine");
    await turn("b-1");
    expect(calls).toEqual(["b-1"]);
    expect(await server.effects(name)).toBe(1);
    await turn("b-2");
    const second = seen[seen.length - 1]!.match(/operations\/([0-9a-f-]{36})/)![1]!;
    await approver.reject(second, "duplicate request");
    await turn("b-2");
    expect(seen[seen.length - 1]).toMatch(new RegExp(`rejected by ${approver.username} .*duplicate request`));
    expect(calls).toEqual(["b-1"]);
    expect(await server.effects(name)).toBe(1);
  });
});
