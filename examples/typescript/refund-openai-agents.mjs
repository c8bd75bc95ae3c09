// A refund agent on the OpenAI Agents SDK for JavaScript, its tool guarded by idem, run twice
// as a retried run would be: the refund happens once, and the second time the model reads
// idem's note. The model is scripted (no network).
//
//   make build && npm --prefix clients/typescript ci && npm --prefix examples/typescript install
//   IDEM_URL=http://127.0.0.1:3000 IDEM_API_KEY=idem_… node examples/typescript/refund-openai-agents.mjs

import { Agent, Runner, setTracingDisabled, tool, Usage } from "@openai/agents";
import { z } from "zod";
import { Idem } from "@idem/client";
import { withIdem } from "@idem/client/openai-agents";

setTracingDisabled(true);
const idem = new Idem({ baseUrl: process.env.IDEM_URL ?? "http://127.0.0.1:3000", apiKey: process.env.IDEM_API_KEY });

const model = {
  async getResponse({ input }) {
    const result = (Array.isArray(input) ? input : []).filter((item) => item.type === "function_call_result").pop();
    if (result) {
      const text = typeof result.output === "string" ? result.output : result.output.text;
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }] };
    }
    const call = { type: "function_call", callId: "call-1", name: "refund", arguments: JSON.stringify({ orderId: "5678", cents: 500 }), status: "completed" };
    return { usage: new Usage(), output: [call] };
  },
  async *getStreamedResponse() {
    throw new Error("not used");
  },
};

let refunds = 0;
const refund = tool({
  name: "refund",
  description: "Refunds an order",
  parameters: z.object({ orderId: z.string(), cents: z.number() }),
  execute: async ({ orderId, cents }) => {
    refunds += 1; // your payment provider's call goes here
    return { refundId: `re_${orderId}`, cents };
  },
});
const tools = withIdem(idem, [refund], { keys: { refund: (input) => `refund:${input.orderId}` } });
const agent = new Agent({ name: "support", model, tools });

for (const attempt of [1, 2]) {
  const result = await idem.run("run-agents-example", () => new Runner().run(agent, "Refund order 5678"));
  console.log(`run ${attempt}: the agent said ${result.finalOutput}`);
}
console.log(`refunds at the provider: ${refunds}`);
