// The Vercel AI SDK's real generateText loop with its mock language model (scripted: it calls
// the tool once, then answers with what the tool said), tools wrapped by withIdem, a real idem.
// The AI SDK's own approval flow answered by idem is in ai-sdk-approvals.test.ts.

import { generateText, stepCountIs, tool } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { withIdem } from "../src/ai-sdk.js";
import { scriptedLanguageModel as scriptedModel } from "./scripted.js";
import { TestServer, uniqueTool } from "./server.js";

let server: TestServer;
beforeAll(async () => {
  server = await TestServer.start();
});
afterAll(async () => {
  await server.stop();
});

/** One agent turn: the model asks for a refund of `input`, through idem, at the sandbox provider. */
async function refundTurn(idem: Idem, name: string, input: { orderId: string; cents: number }, seen: unknown[], calls: string[]) {
  const refund = tool({
    description: "Refunds an order",
    inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (args) => {
      calls.push(args.orderId);
      await server.act(name, args);
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
    expect(await server.effects(name)).toBe(1);
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
    expect(await server.effects(name)).toBe(1);
    expect(String(seen[1])).toMatch(/^Not done/);
  });

  it("holds an irreversible tool for a person, runs it once approved, and passes a rejection on", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
    const approver = await server.newPerson("approver");
    const seen: unknown[] = [];
    const calls: string[] = [];
    const turn = (orderId: string) => idem.run(`ai-${orderId}`, () => refundTurn(idem, name, { orderId, cents: 5 }, seen, calls));

    await turn("a-1");
    expect(String(seen[0])).toMatch(/needs a person's approval in idem/);
    expect(calls).toEqual([]);
    // The operation's id, from the dashboard link the model was given.
    const id = String(seen[0]).match(/operations\/([0-9a-f-]{36})/)![1]!;
    await approver.approve(id, "checked");
    await turn("a-1");
    await turn("a-1");
    expect(calls).toEqual(["a-1"]);
    expect(await server.effects(name)).toBe(1);

    await turn("a-2");
    const second = String(seen[seen.length - 1]).match(/operations\/([0-9a-f-]{36})/)![1]!;
    await approver.reject(second, "customer already refunded");
    await turn("a-2");
    expect(String(seen[seen.length - 1])).toMatch(new RegExp(`rejected by ${approver.username}.*customer already refunded`));
    expect(calls).toEqual(["a-1"]);
    expect(await server.effects(name)).toBe(1);
  });
});
