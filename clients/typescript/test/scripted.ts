// The scripted models the adapter tests drive the toolkits' real loops with: each calls one
// tool once, then answers with what the tool said, which it also notes in `seen`, so a test
// can read what the model was told.

import { Usage, type Model, type ModelRequest } from "@openai/agents";
import { MockLanguageModelV4 } from "ai/test";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** For the AI SDK: calls `toolName` with `input` (call id `call-<n>`, n = outputs seen so far). */
export function scriptedLanguageModel(toolName: string, input: unknown, seen: unknown[]) {
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

/** For the OpenAI Agents SDK: calls `name` with `args` (call id `c-<n>`, n = outputs seen so far). */
export function scriptedAgentModel(name: string, args: unknown, seen: string[]): Model {
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
