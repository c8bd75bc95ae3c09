// A refund agent on the Vercel AI SDK, its tool guarded by idem, run twice as a retried run
// would be: the refund happens once, and the second time the model reads idem's note.
// The model is scripted (no network): it asks for the refund, then repeats what the tool said.
//
//   make build && npm --prefix clients/typescript ci && npm --prefix examples/typescript install
//   IDEM_URL=http://127.0.0.1:3000 IDEM_API_KEY=idem_… node examples/typescript/refund-ai-sdk.mjs

import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { Idem } from "@idem/client";
import { withIdem } from "@idem/client/ai-sdk";

const idem = new Idem({ baseUrl: process.env.IDEM_URL ?? "http://127.0.0.1:3000", apiKey: process.env.IDEM_API_KEY });
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

const model = new MockLanguageModelV4({
  doGenerate: async ({ prompt }) => {
    const last = prompt[prompt.length - 1];
    if (last.role === "tool") {
      const text = JSON.stringify(last.content[0].output.value);
      return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    }
    const call = { type: "tool-call", toolCallId: "call-1", toolName: "refund", input: JSON.stringify({ orderId: "1234", cents: 500 }) };
    return { content: [call], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
  },
});

let refunds = 0;
const refund = tool({
  description: "Refunds an order",
  inputSchema: z.object({ orderId: z.string(), cents: z.number() }),
  execute: async ({ orderId, cents }) => {
    refunds += 1; // your payment provider's call goes here
    return { refundId: `re_${orderId}`, cents };
  },
});
const tools = withIdem(idem, { refund }, { keys: { refund: (input) => `refund:${input.orderId}` } });

for (const attempt of [1, 2]) {
  const { text } = await idem.run("run-ai-sdk-example", () =>
    generateText({ model, tools, prompt: "Refund order 1234", stopWhen: stepCountIs(3) }),
  );
  console.log(`run ${attempt}: the agent said ${text}`);
}
console.log(`refunds at the provider: ${refunds}`);
