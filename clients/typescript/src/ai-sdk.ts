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

import type { ApprovalState } from "./approvals.js";
import type { Idem } from "./client.js";
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

/**
 * A paused run's request for approval: in a result's `content` it carries the `toolCall`; in
 * the messages the run answered (`response.messages`, as an application stores them) the
 * `toolCallId` of a `tool-call` part beside it.
 */
export interface ToolApprovalRequestPart {
  type: "tool-approval-request";
  approvalId: string;
  toolCall?: ToolCallOfModel;
  toolCallId?: string;
  /** Decided by the approval rule itself (`approved` or `denied`), not asked of anyone. */
  isAutomatic?: boolean;
}

/** The answer to one request, as the AI SDK takes it in a `tool` message to resume the run. */
export interface ToolApprovalResponsePart {
  type: "tool-approval-response";
  approvalId: string;
  approved: boolean;
  reason?: string;
}

/** A result's content part, or a message of the conversation. */
export type PartOrMessage = { type: string } | { role: string; content: unknown };

/**
 * The responses that resume a paused run, from the decisions people made in idem: one per
 * request still open in `parts` (a result's `content`, or the conversation's messages, also
 * in a later process) that idem decided: approved, or denied with idem's note (who rejected
 * it, and why), which the model reads. A request still waiting for a person has none, nor
 * has a request for a tool that waits for no one in idem (that one is yours to answer).
 * `waitSeconds` holds each question up to that long while its call waits for a person.
 */
export async function idemApprovalResponses(
  idem: Idem,
  parts: ReadonlyArray<PartOrMessage>,
  options: ApprovalOptions & { waitSeconds?: number } = {},
): Promise<ToolApprovalResponsePart[]> {
  const responses: ToolApprovalResponsePart[] = [];
  for (const { approvalId, toolCall } of openRequests(parts)) {
    const name = options.names?.[toolCall.toolName] ?? toolCall.toolName;
    const key = options.keys?.[toolCall.toolName];
    const state = await ask(idem, name, toolCall.input, toolCall.toolCallId, key, options.waitSeconds);
    if (state.decision === "rejected") {
      responses.push({ type: "tool-approval-response", approvalId, approved: false, reason: state.reason });
    } else if (state.decision === "approved" || state.decision === "not_needed") {
      responses.push({ type: "tool-approval-response", approvalId, approved: true });
    }
  }
  return responses;
}

/** The requests of `parts` that nobody answered yet, each with its tool call. */
function openRequests(parts: ReadonlyArray<PartOrMessage>): { approvalId: string; toolCall: ToolCallOfModel }[] {
  const flat = parts.flatMap((item) =>
    "role" in item ? (Array.isArray(item.content) ? (item.content as { type: string }[]) : []) : [item],
  );
  const calls = new Map<string, ToolCallOfModel>();
  const answered = new Set<string>();
  for (const part of flat) {
    if (part.type === "tool-call") {
      const { toolCallId, toolName, input } = part as Partial<ToolCallOfModel>;
      if (toolCallId !== undefined && toolName !== undefined) calls.set(toolCallId, { toolCallId, toolName, input });
    } else if (part.type === "tool-approval-response") {
      answered.add((part as Partial<ToolApprovalResponsePart>).approvalId ?? "");
    }
  }
  const open: { approvalId: string; toolCall: ToolCallOfModel }[] = [];
  for (const part of flat) {
    if (part.type !== "tool-approval-request") continue;
    const request = part as ToolApprovalRequestPart;
    const toolCall = request.toolCall ?? calls.get(request.toolCallId ?? "");
    if (request.isAutomatic || answered.has(request.approvalId) || !toolCall) continue;
    open.push({ approvalId: request.approvalId, toolCall });
  }
  return open;
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
    case "no_person":
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
