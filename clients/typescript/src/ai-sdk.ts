// The Vercel AI SDK: `withIdem(idem, tools)` puts each tool's `execute` through idem. Run the
// agent inside `idem.run(runId, …)`: each tool call then gets the next step of the run, so a
// retried or resumed run finds the same operations and acts once. The model is told what
// idem knows, as the tool's output: a replay's note with the stored result, a call that
// waits for a person's approval in idem (nothing done yet), or a refusal and its reason.
//
// No dependency on `ai`: a tool is anything with an `execute(input, options)`.

import type { Idem } from "./client.js";
import type { GuardResult } from "./models.js";
import { toldToTheModel } from "./told.js";

/** The part of an AI SDK tool this adapter uses. */
export interface ExecutableTool {
  execute?: (input: never, options: never) => unknown;
}

export interface WithIdemOptions<TOOLS> {
  /** idem's registry name of a tool, when it differs from its key in `tools`. */
  names?: Partial<Record<keyof TOOLS, string>>;
  /** A business identity from a tool's input, per tool (`(input) => "refund:" + input.orderId`). */
  keys?: Partial<Record<keyof TOOLS, (input: Record<string, unknown>) => string>>;
}

/** What the model reads after a replay: idem's note, then the stored result. */
export interface ReplayedOutput {
  note: string;
  result: unknown;
}

/** `tools` with each `execute` guarded by idem (tools without `execute` are kept as they are). */
export function withIdem<TOOLS extends Record<string, ExecutableTool>>(
  idem: Idem,
  tools: TOOLS,
  options: WithIdemOptions<TOOLS> = {},
): TOOLS {
  const guarded: Record<string, ExecutableTool> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute as ((input: unknown, options: unknown) => unknown) | undefined;
    if (!execute) {
      guarded[name] = tool;
      continue;
    }
    const registered = options.names?.[name as keyof TOOLS] ?? name;
    const key = options.keys?.[name as keyof TOOLS];
    guarded[name] = {
      ...tool,
      execute: (async (input: Record<string, unknown>, callOptions: unknown) => {
        const call = idem.guard(registered, async (args: Record<string, unknown>) => execute(args, callOptions), {
          withNote: true,
          key: key ? (args: Record<string, unknown>) => key(args) : undefined,
        });
        try {
          const outcome = (await call(input)) as GuardResult<unknown>;
          return outcome.replayed ? ({ note: outcome.note ?? "", result: outcome.value } satisfies ReplayedOutput) : outcome.value;
        } catch (error) {
          return toldToTheModel(error);
        }
      }) as never,
    };
  }
  return guarded as TOOLS;
}
