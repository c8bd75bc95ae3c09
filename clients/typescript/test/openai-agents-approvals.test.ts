// The OpenAI Agents SDK's own approval flow answered by idem: the real Runner with a scripted
// Model is interrupted at an irreversible refund (`needsApproval` answered by idem), an
// approver signed in to idem decides through its HTTP API, `decideFromIdem` records the
// decision in the run's state, and the run resumes from its `RunState`. The refund acts at
// the sandbox provider, which counts what was really done.

import { Agent, Runner, RunState, setTracingDisabled, tool } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";

import { Idem } from "../src/index.js";
import { decideFromIdem, withIdem } from "../src/openai-agents.js";
import { scriptedAgentModel } from "./scripted.js";
import { TestServer, uniqueTool, type Person } from "./server.js";

setTracingDisabled(true);

let server: TestServer;
let approver: Person;
beforeAll(async () => {
  server = await TestServer.start();
  approver = await server.newPerson("approver");
});
afterAll(async () => {
  await server.stop();
});

const runner = new Runner();

/** An agent whose model asks `idem`-guarded irreversible refund `name` to refund `orderId`; `seen`: what it was told. */
function refundAgent(idem: Idem, name: string, orderId: string, seen: string[]) {
  const refund = tool({
    name,
    description: "Refunds an order",
    parameters: z.object({ orderId: z.string(), cents: z.number() }),
    execute: async (input) => ({ refundId: (await server.act(name, input)).id }),
  });
  const keys = { [name]: (input: Record<string, unknown>) => `refund:${input.orderId}` };
  const tools = withIdem(idem, [refund], { keys, needsApproval: true });
  return { keys, agent: new Agent({ name: "support", model: scriptedAgentModel(name, { orderId, cents: 5 }, seen), tools }) };
}

async function irreversible(name: string): Promise<void> {
  await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible" });
}

describe("the Agents SDK's approval flow answered by idem", () => {
  it("interrupts until an approver approves in idem, then refunds once, also when resumed twice", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await irreversible(name);
    const seen: string[] = [];
    const { agent, keys } = refundAgent(idem, name, "i-1", seen);

    const first = await idem.run("oa-approve", () => runner.run(agent, "refund it"));
    expect(first.interruptions).toHaveLength(1);
    const [id] = await server.waitingForApproval(name);
    expect(id, "on the approvals page").toBeDefined();
    expect(await decideFromIdem(idem, first, { keys }), "nobody decided yet").toBe(1);

    // The application waits for the decision while a person makes it.
    const deciding = decideFromIdem(idem, first, { keys, waitSeconds: 20 });
    await new Promise((done) => setTimeout(done, 300));
    await approver.approve(id!, "checked the order");
    expect(await deciding).toBe(0);
    expect(await server.statusOf(id!), "asking took no lease").toBe("approved");
    const saved = first.state.toString();

    const resumed = await idem.run("oa-approve", () => runner.run(agent, first.state));
    expect(resumed.interruptions ?? []).toHaveLength(0);
    expect(await server.effects(name)).toBe(1);
    expect(seen[0]).toMatch(/eff_/);
    expect(await server.statusOf(id!)).toBe("succeeded");

    // The same resumption again (a retried process, from the state it saved): nothing is refunded again.
    const retried = await idem.run("oa-approve", async () => runner.run(agent, await RunState.fromString(agent, saved)));
    expect(retried.interruptions ?? []).toHaveLength(0);
    expect(await server.effects(name)).toBe(1);
    expect(seen[1]).toMatch(/no new action taken\. Stored result: .*eff_/);
  });

  it("gives the model an approver's rejection with who and why, and refunds nothing", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    await irreversible(name);
    const seen: string[] = [];
    const { agent, keys } = refundAgent(idem, name, "i-2", seen);

    const interrupted = await idem.run("oa-reject", () => runner.run(agent, "refund it"));
    const [id] = await server.waitingForApproval(name);
    await approver.reject(id!, "customer already refunded");
    expect(await decideFromIdem(idem, interrupted, { keys })).toBe(0);
    await idem.run("oa-reject", () => runner.run(agent, interrupted.state));
    expect(seen[0]).toMatch(new RegExp(`^Not done, do not retry: rejected by ${approver.username} .*customer already refunded`));
    expect(await server.effects(name)).toBe(0);
  });

  it("resumes a saved RunState in another process once approved, and refunds once", async () => {
    const apiKey = await server.newKey();
    const name = uniqueTool();
    await irreversible(name);
    const first = new Idem({ baseUrl: server.baseUrl, apiKey });
    const interrupted = await first.run("oa-elsewhere", () => runner.run(refundAgent(first, name, "i-3", []).agent, "refund it"));
    // What the application keeps while a person decides: the run's state, as a string.
    const saved = interrupted.state.toString();
    const [id] = await server.waitingForApproval(name);
    await approver.approve(id!);

    const later = new Idem({ baseUrl: server.baseUrl, apiKey });
    const seen: string[] = [];
    const { agent, keys } = refundAgent(later, name, "i-3", seen);
    const state = await RunState.fromString(agent, saved);
    expect(await decideFromIdem(later, state, { keys })).toBe(0);
    await runner.run(agent, state);
    expect(seen[0]).toMatch(/eff_/);
    expect(await server.effects(name)).toBe(1);
  });

  it("does not refund on an attempt whose lease ran out between the decision and the resumption", async () => {
    const apiKey = await server.newKey();
    const name = uniqueTool();
    await server.asAdmin("PUT", `/v1/tools/${name}`, { effect: "irreversible", lease_seconds: 2 });
    const first = new Idem({ baseUrl: server.baseUrl, apiKey });
    const interrupted = await first.run("oa-lapsed", () => runner.run(refundAgent(first, name, "i-5", []).agent, "refund it"));
    const saved = interrupted.state.toString();
    const [id] = await server.waitingForApproval(name);
    await approver.approve(id!);

    // Another process asks first: the call is approved, so its claim opens the attempt.
    const later = new Idem({ baseUrl: server.baseUrl, apiKey });
    const seen: string[] = [];
    const { agent, keys } = refundAgent(later, name, "i-5", seen);
    const state = await RunState.fromString(agent, saved);
    expect(await decideFromIdem(later, state, { keys })).toBe(0);
    expect(await server.statusOf(id!)).toBe("pending");
    await new Promise((done) => setTimeout(done, 2_500));
    // As for any guarded call whose outcome nobody knows, the error stops the run.
    await expect(runner.run(agent, state)).rejects.toThrow(/OutcomeUnknown: .* is unknown/);
    expect(await server.effects(name), "never acted on a lapsed lease").toBe(0);
    expect(await server.statusOf(id!)).toBe("unknown");
  });

  it("leaves an interruption of a tool idem does not hold to the application", async () => {
    const idem = new Idem({ baseUrl: server.baseUrl, apiKey: await server.newKey() });
    const name = uniqueTool();
    const own = tool({
      name,
      description: "Refunds an order, held by the application's own rule",
      parameters: z.object({ orderId: z.string(), cents: z.number() }),
      needsApproval: true,
      execute: async (input) => ({ refundId: (await server.act(name, input)).id }),
    });
    const agent = new Agent({ name: "support", model: scriptedAgentModel(name, { orderId: "i-4", cents: 5 }, []), tools: withIdem(idem, [own]) });
    const interrupted = await idem.run("oa-own", () => runner.run(agent, "refund it"));
    expect(interrupted.interruptions).toHaveLength(1);
    expect(await decideFromIdem(idem, interrupted), "idem has no say in it").toBe(1);
    expect(interrupted.state.getInterruptions()).toHaveLength(1);
    expect(await server.effects(name)).toBe(0);
  });
});
