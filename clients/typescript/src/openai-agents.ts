// The OpenAI Agents SDK for JavaScript: `withIdem(idem, tools)` puts each function tool's
// invocation through idem. Run the agent inside `idem.run(runId, …)`: each tool call then gets
// the next step of the run, so a retried or resumed run acts once. The model reads, as the
// tool's output, idem's note and the stored result after a repeat, or that a call waits for a
// person's approval in idem, or a refusal and its reason.
//
// No dependency on `@openai/agents`: a tool is anything with a `name` and an
// `invoke(runContext, input)` taking the model's arguments as JSON text.

import type { Idem } from "./client.js";
import type { GuardResult } from "./models.js";
import { toldToTheModel } from "./told.js";

/** The part of an Agents SDK function tool this adapter uses. */
export interface InvokableTool {
  name: string;
  invoke: (runContext: never, input: string, details?: never) => Promise<unknown>;
}

export interface WithIdemOptions {
  /** idem's registry name of a tool, when it differs from the tool's name. */
  names?: Record<string, string>;
  /** A business identity from a tool's arguments, per tool name. */
  keys?: Record<string, (args: Record<string, unknown>) => string>;
}

/** `tools` with each invocation guarded by idem. */
export function withIdem<T extends InvokableTool>(idem: Idem, tools: T[], options: WithIdemOptions = {}): T[] {
  return tools.map((tool) => {
    const invoke = tool.invoke as (runContext: unknown, input: string, details?: unknown) => Promise<unknown>;
    const registered = options.names?.[tool.name] ?? tool.name;
    const key = options.keys?.[tool.name];
    const guarded = async (runContext: unknown, input: string, details?: unknown) => {
      const args = (input ? JSON.parse(input) : {}) as Record<string, unknown>;
      const call = idem.guard(registered, async (_: Record<string, unknown>) => invoke(runContext, input, details), {
        withNote: true,
        key: key ? (named: Record<string, unknown>) => key(named) : undefined,
      });
      try {
        const outcome = (await call(args)) as GuardResult<unknown>;
        if (!outcome.replayed) return outcome.value;
        const stored = typeof outcome.value === "string" ? outcome.value : JSON.stringify(outcome.value);
        return `${outcome.note ?? "already completed"}. Stored result: ${stored}`;
      } catch (error) {
        return toldToTheModel(error);
      }
    };
    return { ...tool, invoke: guarded as T["invoke"] };
  });
}
