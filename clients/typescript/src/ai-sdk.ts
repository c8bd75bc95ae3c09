// The Vercel AI SDK: `withIdem(idem, tools)` puts each tool's `execute` through idem. Run the
// agent inside `idem.run(runId, …)`: each tool call then gets the next step of the run, so a
// retried or resumed run finds the same operations and acts once. The model is told what
// idem knows, as the tool's output: a replay's note with the stored result, a call that
// waits for a person's approval in idem (nothing done yet), or a refusal and its reason.
//
// A call of a tool that waits for a person can also pause the run in the AI SDK's own
// approval flow, answered by idem: `idemToolApproval` (AI SDK 7's `toolApproval`) or
// `withIdem(…, { needsApproval: true })` (the tool's `needsApproval`, AI SDK 6 and 7). A paused
// run resumes with `idemApprovalResponses`, which reads the person's decision in idem.
//
// No dependency on `ai`: a tool is anything with an `execute(input, options)`.

import type { ApprovalState, Idem } from "./client.js";
import type { GuardResult } from "./models.js";
import { toldToTheModel } from "./told.js";

/** The part of an AI SDK tool this adapter uses. */
export interface ExecutableTool {
  execute?: (input: never, options: never) => unknown;
  needsApproval?: unknown;
}

/** The part of an AI SDK tool call the approval rules read. */
export interface ToolCallOfModel {
  toolName: string;
  toolCallId: string;
  input: unknown;
}

/** The AI SDK's approval statuses that idem's answers map to. */
export type IdemApprovalStatus =
  | "not-applicable"
  | "approved"
  | { type: "user-approval"; reason: string }
  | { type: "denied"; reason: string };

export interface ApprovalOptions {
  /** idem's registry name of a tool, when it differs from its name in the toolkit. */
  names?: Record<string, string>;
  /** A business identity from a tool's input, per tool, as given to `withIdem`. */
  keys?: Record<string, (input: Record<string, unknown>) => string>;
}

export interface WithIdemOptions<TOOLS> {
  /** idem's registry name of a tool, when it differs from its key in `tools`. */
  names?: Partial<Record<keyof TOOLS, string>>;
  /** A business identity from a tool's input, per tool (`(input) => "refund:" + input.orderId`). */
  keys?: Partial<Record<keyof TOOLS, (input: Record<string, unknown>) => string>>;
  /** Give each tool a `needsApproval` answered by idem: a call waiting for a person pauses the run. */
  needsApproval?: boolean;
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
    const approval = options.needsApproval
      ? {
          needsApproval: async (input: Record<string, unknown>, callOptions: { toolCallId: string }) => {
            const state = await ask(idem, registered, input, callOptions.toolCallId, key);
            return state.decision === "awaiting";
          },
        }
      : {};
    guarded[name] = {
      ...tool,
      ...approval,
      execute: (async (input: Record<string, unknown>, callOptions: { toolCallId?: string }) => {
        const call = idem.guard(registered, async (args: Record<string, unknown>) => execute(args, callOptions as never), {
          withNote: true,
          key: key ? (args: Record<string, unknown>) => key(args) : undefined,
          callId: callOptions?.toolCallId,
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

/**
 * A `toolApproval` rule (AI SDK 7) answered by idem: a call of a tool that waits for a person
 * in idem pauses the run for approval (`user-approval`, with the dashboard's link as the
 * reason) until a person decides there; then it is `approved` and runs once through
 * `withIdem`, or `denied` with the approver's reason. Other tools are `not-applicable`.
 */
export function idemToolApproval(idem: Idem, options: ApprovalOptions = {}) {
  return async ({ toolCall }: { toolCall: ToolCallOfModel }): Promise<IdemApprovalStatus> => {
    const name = options.names?.[toolCall.toolName] ?? toolCall.toolName;
    const state = await ask(idem, name, toolCall.input, toolCall.toolCallId, options.keys?.[toolCall.toolName]);
    return statusOf(state);
  };
}

/** A paused run's request for approval, as the AI SDK gives it in a result's `content`. */
export interface ToolApprovalRequestPart {
  type: "tool-approval-request";
  approvalId: string;
  toolCall: ToolCallOfModel;
}

/** The answer to one request, as the AI SDK takes it in a `tool` message to resume the run. */
export interface ToolApprovalResponsePart {
  type: "tool-approval-response";
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/**
 * The responses that resume a paused run, from the decisions people made in idem: one per
 * request of `content` that is decided (approved, or rejected with the approver's reason);
 * a request still waiting for a person has none. `waitSeconds` holds each question up to
 * that long while its call waits (idem's `Prefer: wait`).
 */
export async function idemApprovalResponses(
  idem: Idem,
  content: ReadonlyArray<{ type: string }>,
  options: ApprovalOptions & { waitSeconds?: number } = {},
): Promise<ToolApprovalResponsePart[]> {
  const responses: ToolApprovalResponsePart[] = [];
  for (const part of content) {
    if (part.type !== "tool-approval-request") continue;
    const { approvalId, toolCall } = part as ToolApprovalRequestPart;
    const name = options.names?.[toolCall.toolName] ?? toolCall.toolName;
    const key = options.keys?.[toolCall.toolName];
    const state = await ask(idem, name, toolCall.input, toolCall.toolCallId, key, options.waitSeconds);
    if (state.decision === "awaiting") continue;
    responses.push(
      state.decision === "rejected"
        ? { type: "tool-approval-response", approvalId, approved: false, reason: state.reason }
        : { type: "tool-approval-response", approvalId, approved: true },
    );
  }
  return responses;
}

/** Asks idem where the tool call stands (see `Idem.approvalState`). */
function ask(
  idem: Idem,
  tool: string,
  input: unknown,
  callId: string,
  key?: (input: Record<string, unknown>) => string,
  waitSeconds?: number,
): Promise<ApprovalState> {
  const args = (input ?? {}) as Record<string, unknown>;
  return idem.approvalState(tool, args, { callId, businessKey: key?.(args), waitSeconds });
}

/** idem's answer as the AI SDK's approval status. */
function statusOf(state: ApprovalState): IdemApprovalStatus {
  switch (state.decision) {
    case "not_needed":
      return "not-applicable";
    case "approved":
      return "approved";
    case "awaiting":
      return { type: "user-approval", reason: `waits for a person's approval in idem: ${state.dashboardUrl}` };
    case "rejected":
      return { type: "denied", reason: state.reason };
  }
}
