// The OpenAI Agents SDK for JavaScript: `withIdem(idem, tools)` puts each function tool's
// invocation through idem. Run the agent inside `idem.run(runId, …)`: each tool call then gets
// the next step of the run, so a retried or resumed run acts once. The model reads, as the
// tool's output, idem's note and the stored result after a repeat, or that a call waits for a
// person's approval in idem, or a refusal and its reason.
//
// With `needsApproval: true`, a call of a tool that waits for a person in idem interrupts the
// run in the SDK's own approval flow; `decideFromIdem` approves or rejects the interruptions
// as people decided in idem (a rejection with the approver's reason for the model), and the
// run resumes from its `RunState`.
//
// No dependency on `@openai/agents`: a tool is anything with a `name` and an
// `invoke(runContext, input)` taking the model's arguments as JSON text.

import type { ApprovalState } from "./approvals.js";
import type { Idem } from "./client.js";
import type { GuardResult } from "./models.js";
import { toldToTheModel } from "./told.js";

/** The part of an Agents SDK function tool this adapter uses. */
export interface InvokableTool {
  name: string;
  invoke: (runContext: never, input: string, details?: never) => Promise<unknown>;
  needsApproval?: unknown;
}

export interface WithIdemOptions {
  /** idem's registry name of a tool, when it differs from the tool's name. */
  names?: Record<string, string>;
  /** A business identity from a tool's arguments, per tool name. */
  keys?: Record<string, (args: Record<string, unknown>) => string>;
  /** Give each tool a `needsApproval` answered by idem: a call waiting for a person interrupts the run. */
  needsApproval?: boolean;
}

/** `tools` with each invocation guarded by idem. */
export function withIdem<T extends InvokableTool>(idem: Idem, tools: T[], options: WithIdemOptions = {}): T[] {
  return tools.map((tool) => {
    const invoke = tool.invoke as (runContext: unknown, input: string, details?: unknown) => Promise<unknown>;
    const registered = options.names?.[tool.name] ?? tool.name;
    const key = options.keys?.[tool.name];
    const guarded = async (runContext: unknown, input: string, details?: { toolCall?: { callId?: string } }) => {
      const args = (input ? JSON.parse(input) : {}) as Record<string, unknown>;
      const call = idem.guard(registered, async (_: Record<string, unknown>) => invoke(runContext, input, details), {
        withNote: true,
        key: key ? (named: Record<string, unknown>) => key(named) : undefined,
        callId: details?.toolCall?.callId,
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
    const approval = options.needsApproval
      ? {
          needsApproval: async (_: unknown, input: Record<string, unknown>, callId?: string) => {
            if (callId === undefined) return false;
            const state = await ask(idem, registered, input, callId, key);
            return state.decision === "awaiting";
          },
        }
      : {};
    return { ...tool, ...approval, invoke: guarded as T["invoke"] };
  });
}

/** A tool call an interrupted run waits on, as the SDK gives it (`RunToolApprovalItem`). */
export interface ApprovalItem {
  name?: string;
  arguments?: string;
  rawItem: object;
}

/** What records the decisions on a run's interruptions: the SDK's `RunState`. */
export interface Decisions {
  approve(item: never): void;
  reject(item: never, options?: { message?: string }): void;
}

/**
 * A run interrupted for approval: its result (`result.interruptions`, `result.state`), or its
 * `RunState` alone, as `RunState.fromString(agent, saved)` gives it back in another process.
 */
export type InterruptedRun =
  | { interruptions: ReadonlyArray<ApprovalItem>; state: Decisions }
  | (Decisions & { getInterruptions(): ReadonlyArray<ApprovalItem> });

/**
 * Approves or rejects the run's interruptions as people decided in idem: approved (or past
 * approval in idem: the guarded call replays it), or rejected with idem's note (who rejected
 * it, and why) as the model's message. An interruption still waiting for a person is left as
 * it is, and so is one of a tool that waits for no one in idem (that one is yours to decide).
 * Answers how many are left; resume the run from its state (`runner.run(agent, result.state)`)
 * once it is 0. `waitSeconds` holds each question up to that long while its call waits.
 */
export async function decideFromIdem(
  idem: Idem,
  run: InterruptedRun,
  options: Omit<WithIdemOptions, "needsApproval"> & { waitSeconds?: number } = {},
): Promise<number> {
  const [interruptions, decisions] =
    "state" in run ? [run.interruptions, run.state] : [run.getInterruptions(), run];
  let waiting = 0;
  for (const item of interruptions) {
    const name = item.name ?? "";
    const callId = (item.rawItem as { callId?: string }).callId;
    if (callId === undefined) {
      waiting++;
      continue;
    }
    const args = (item.arguments ? JSON.parse(item.arguments) : {}) as Record<string, unknown>;
    const registered = options.names?.[name] ?? name;
    const state = await ask(idem, registered, args, callId, options.keys?.[name], options.waitSeconds);
    if (state.decision === "awaiting" || state.decision === "no_person") waiting++;
    else if (state.decision === "rejected") decisions.reject(item as never, { message: `Not done, do not retry: ${state.reason}` });
    else decisions.approve(item as never);
  }
  return waiting;
}

/** Asks idem where the tool call stands (see `Idem.approvalState`). */
function ask(
  idem: Idem,
  tool: string,
  args: Record<string, unknown>,
  callId: string,
  key?: (args: Record<string, unknown>) => string,
  waitSeconds?: number,
): Promise<ApprovalState> {
  return idem.approvalState(tool, args, { callId, businessKey: key?.(args), waitSeconds });
}
